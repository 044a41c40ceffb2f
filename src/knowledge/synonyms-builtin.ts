// The built-in synonym groups (synonyms.ts): everyday Dutch and English words for what a
// workplace handbook covers (leave, pay, IT, facilities, expenses and travel), so that a
// question in either language, or in colloquial words, also finds the section written in
// the other or in formal ones. General vocabulary, not any one organisation's: add your
// own terms (product names, internal jargon, codes) in RAG_SYNONYMS_FILE, or turn this
// list off with RAG_BUILTIN_SYNONYMS=false for a knowledge base in other languages.
// Format: one group per line, members separated by commas, `word*` matches every word
// that starts with it, `#` starts a comment.
export const BUILTIN_SYNONYMS = `
# Working time and leave
werktijden, werkuren, werktijd, working hours, work hours, office hours, kantooruren
flexibele uren, flexibel werken, glijtijden, flexitime, flexible hours, flexible working
uren schrijven, uren invullen, urenregistratie, urenbriefje, timesheet*, hours registration
vakantie*, vakantiedagen, verlofdagen, vrije dagen, vrije dag, snipperdag*, holiday*, vacation*, days off, day off, annual leave, time off, pto
verlof, leave, vrij nemen, vrij vragen, take off
bijzonder verlof, special leave, calamiteitenverlof, emergency leave, kort verzuimverlof, compassionate leave, bereavement leave
overlijden, overleden, overlijdt, sterven, gestorven, dood, begrafenis, uitvaart, crematie, death, died, dies, passed away, funeral, bereavement
grootouder*, oma, opa, grootmoeder, grootvader, grandparent*, grandmother, grandfather, grandma, grandpa, granny
ouders, vader, moeder, pa, ma, parents, father, mother, dad, mum, mom
trouwen, trouw, huwelijk, bruiloft, getrouwd, trouwdag, geregistreerd partnerschap, marriage, married, marry, wedding, getting married
verhuizen, verhuizing, verhuis, verhuisdag, moving house, move house, moving, relocation, relocate
zwanger*, zwangerschap*, bevalling*, bevallen, uitgerekend, pregnant, pregnancy, maternity, maternity leave, expecting a baby
geboorteverlof, partnerverlof, vaderschapsverlof, kraamverlof, paternity leave, partner leave, birth leave
ouderschapsverlof, parental leave, ouderschap
kind*, zoon, dochter, baby, child*, kid, kids, son, daughter
leeftijd, jaar oud, jarig, verjaardag, ouder dan, age, years old, turning, birthday, older than
ziek*, ziekte, ziekmelding, ziekmelden, ziek melden, sick*, ill, illness, sick leave, call in sick, calling in sick, unwell, griep, flu
verzuim, afwezig, absence, absent, absenteeism, uitval
langdurig ziek, langdurig verzuim, re-integratie, reintegratie, reintegration, return to work, burn-out, burnout, overspannen, long-term sick, long-term illness
bedrijfsarts, arbodienst, arbo-arts, arboarts, company doctor, occupational health, occupational physician
dokter, huisarts, arts, ziekenhuis, tandarts, doctor, gp, hospital, dentist, medical appointment
thuiswerk*, thuis werken, werken vanuit huis, work from home, working from home, wfh, home office, remote work*, hybride werken, hybrid work*
thuiswerkvergoeding, internetvergoeding, home working allowance, working from home allowance, wfh allowance
reiskosten*, woon-werk, woon werk, woon-werkverkeer, commute, commuting, commuting allowance, travel allowance
fiets*, fietsen, e-bike, ebike, bike, bikes, bicycle*, cycling, cycle, cyclist
auto, eigen auto, privéauto, car, own car, private car
leaseauto, lease auto, lease car, company car, auto van de zaak
kilometervergoeding, km vergoeding, km-vergoeding, kilometer*, mileage, mileage allowance, per km
openbaar vervoer, ov, ov-kaart, ov-chipkaart, public transport, bus, tram, metro
trein*, ns, intercity, train*, railway, rail
overwerk*, overuren, extra uren, meeruren, overtime, extra hours, working late
toeslag, toeslagen, onregelmatigheidstoeslag, ort, supplement, premium pay, allowance
weekend, zaterdag, zondag, weekends, saturday, sunday
feestdag*, public holiday*, bank holiday*, national holiday*, koningsdag, kerst, christmas, pasen, easter
# Pay and benefits
salaris, loon, salary, pay, wage*, paycheck, betaling, payment
loonstrook, salarisstrook, payslip*, pay slip, loonstroken
betaaldatum, betaaldag, uitbetaling, uitbetaald, payday, pay day, paid out, when paid
voorschot, vooruitbetaling, advance, salary advance, lening, loan
vakantiegeld, vakantietoeslag, holiday pay, holiday allowance
eindejaarsuitkering, dertiende maand, 13e maand, 13de maand, 13th month, year-end bonus, end of year bonus
bonus, bonussen, gratificatie, bonuses
pensioen*, pension*, retirement, pensioenfonds, abp, pfzw, aow
premie, premies, bijdrage, inhouding, contribution*, deduction*, deducted
loonsverhoging, salarisverhoging, opslag, periodiek, raise, pay rise, salary increase, increment
# Development, conduct, the end of employment
opleiding*, cursus*, training*, course*, studie*, study, education, scholing
opleidingsbudget, studiebudget, leerbudget, training budget, learning budget, education budget
congres, conferentie, seminar, symposium, conference
functioneringsgesprek*, beoordelingsgesprek*, jaargesprek*, beoordeling*, gesprekkencyclus, performance review*, appraisal*, evaluation, annual review
vertrouwenspersoon, vertrouwenspersonen, confidential advisor, confidential adviser, confidential counsellor, trusted person
klacht*, complaint*, klachtenregeling, grievance*, klagen, complain
ongewenst gedrag, intimidatie, pesten, gepest, discriminatie, seksuele intimidatie, harassment, bullying, bullied, discrimination, misconduct, grensoverschrijdend gedrag
gedragscode, code of conduct, integriteit, integrity, gedragsregels, rules of conduct
cadeau*, geschenk*, relatiegeschenk*, gift*, present*
nevenwerkzaamheden, bijbaan, nevenfunctie, side job, second job, side business
ontslag, ontslag nemen, opzeggen, opzegging, opzegtermijn, stoppen, vertrekken, uit dienst, resign*, quit, quitting, notice period, leave the company, termination
contract*, arbeidsovereenkomst, arbeidscontract, employment contract, cao, collective agreement
# IT
servicedesk, helpdesk, service desk, it support, ict, it-afdeling, it afdeling, it department, support, systeembeheer
ticket*, melding*, incident*, storingsmelding, support request, request
storing*, outage*, disruption, werkt niet, doet het niet, kapot, broken, not working, does not work, down, defect
prioriteit*, priority, priorities, urgentie, urgent, spoed, p1, p2, p3, p4
oplostijd, doorlooptijd, reactietijd, resolution time, response time, sla
langslopen, langskomen, walk-in, walk in, inloopspreekuur, balie, desk
laptop*, notebook, computer, pc, desktop, werkplek, workstation
wachtwoord*, password*, passphrase, pincode, inloggen, login, log in, inlog, account geblokkeerd, locked out, account locked
mfa, 2fa, tweestapsverificatie, two-factor, two factor, multifactor*, authenticator, verificatiecode, verification code
vpn, remote access, toegang op afstand, inloggen van buitenaf, access from home
netwerkschijf, network drive, s-schijf, h-schijf, s schijf, h schijf, schijf, drive, gedeelde map, shared folder, fileshare
printen, printer*, print*, afdrukken, uitprinten, scannen, scanner, scan*, kopiëren, kopieren, copier, copy
wifi, wi-fi, wlan, draadloos, wireless, draadloos netwerk, gastnetwerk, guest network, hotspot
software*, programma*, app, apps, applicatie*, application*, installeren, install*
telefoon*, mobiel*, mobile*, phone*, smartphone, iphone, gsm, werktelefoon, work phone, company phone
datalek*, data breach, beveiligingsincident*, security incident*, phishing, gehackt, hacked, virus, malware, verdachte mail, suspicious email, suspicious mail
gestolen, kwijt, verloren, vermist, diefstal, lost, stolen, theft, missing
usb, usb-stick, usb stick, memory stick, thumb drive, externe schijf, external drive
privégebruik, prive gebruik, privé, prive, private use, personal use, eigen gebruik
gamen, gaming, games, spelletjes, familie, gezin, family, huisgenoten
acceptable use, gebruiksregels, it-regels, computergebruik, regels voor it, it rules
# Facilities
kantoor, office, gebouw, building, pand, hoofdkantoor, headquarters
openingstijden, opening hours, open, dicht, gesloten, closed, sluitingstijd, closing time, hoe laat, what time
toegangspas, pasje, badge, access card, key card, keycard, sleutelkaart, toegang, access
vergaderruimte*, vergaderkamer*, vergaderzaal, vergaderzalen, meeting room*, conference room*, boardroom, vergaderen, meeting
reserveren, reservering, boeken, booking, book, reservation, reserve
town hall, all-hands, all hands, personeelsbijeenkomst, bijeenkomst, evenement, event, plenary, plenaire
parkeren, parkeerplaats*, parkeergarage, parking, car park, parking space
fietsenstalling, fietsenkelder, fietsenhok, bike storage, bicycle parking, bike shed, bike parking
kantine, bedrijfsrestaurant, restaurant, canteen, cafeteria
lunch, lunchen, eten, broodje, food, meal*
koffie, thee, coffee, tea, koffieautomaat, coffee machine
bhv, bedrijfshulpverlening, bhv'er, ehbo, first aid, first aider, emergency response officer
ontruiming, ontruimen, evacuatie, evacuation, evacuate, brand, brandalarm, fire, fire alarm, fire drill
post, pakket*, package*, parcel*, brief, brieven, letter*, bezorging, bezorgd, delivery, delivered
flexplek*, flexwerkplek*, hot desk*, hot-desking, flex desk, bureau, clean desk
kluisje*, locker*, lockers
lekkage, lekt, leak*, verwarming, heating, airco, air conditioning, temperatuur, temperature, te koud, te warm, too cold, too hot
gevonden voorwerpen, lost and found, lost property, iets laten liggen, left behind
schoonmaak, schoonmaken, cleaning, cleaner*, schoonmaker*
# Finance and travel
declar*, gedeclareerd, onkosten*, onkostennota, expense*, expense claim*, reimburs*, terugbetalen, terugkrijgen, vergoed krijgen, refund*, pay back
bon, bonnetje*, bonnen, kassabon*, receipt*, betaalbewijs, proof of payment
factuur, facturen, invoice*, rekening, bill
leverancier*, supplier*, vendor*
inkoop, inkooporder*, bestelling, bestellen, purchase*, purchase order*, po, order*, aanschaffen, kopen, buy, buying, procurement
offerte*, quote*, quotation*, tender*, aanbesteding*, prijsopgave
goedkeuren, goedkeuring, akkoord, fiat, approval, approve*, sign off, tekenbevoegdheid, budgethouder, budget holder
leidinggevende, manager, teamleider, team lead, teamlead, baas, boss, supervisor, direct report
bedrag*, amount*, limiet, limit*, grens, threshold*, maximum, max, tot hoeveel
creditcard, credit card, bedrijfscreditcard, zakelijke creditcard, corporate card, corporate credit card, company card, company credit card
pinnen, geld opnemen, contant, contant geld, cash, withdraw*, atm, geldautomaat, cash withdrawal
dienstreis*, zakenreis*, werkreis, business trip*, business travel, work trip, travel*, reis, reizen, trip
vlieg*, vliegtuig, vlucht*, flight*, fly, flying, plane, airline
hotel*, overnachting*, overnachten, accommodation, lodging, stay overnight, hotel stay
dagvergoeding, verblijfkosten, per diem, daily allowance, subsistence
maaltijd*, avondeten, diner, dinner, ontbijt, breakfast, etentje, uit eten, eten met, meal*, food, dining
taxi, uber, cab
verzekering, reisverzekering, verzekerd, insurance, travel insurance, insured
noodgeval*, noodsituatie, nood, noodnummer, emergency, emergencies, emergency number, alarmnummer
paspoort, passport, id-kaart, identiteitskaart, identiteitsbewijs, id card, visum, visa
buitenland, buitenlands, abroad, foreign, overseas, international
klant*, klantbezoek*, client*, customer*, client visit*, customer visit*
kosten, uitgaven, costs, cost, spending, expenditure
`;
