-- Whether a failed send may have reached Twilio all the same: it answered with a 5xx (a
-- gateway that timed out on Twilio's answer, a 500 raised after the message was stored).
-- Decided once, where the send failed (src/messaging/transport.ts, SendError.maybeSent), and
-- read by what follows a `send_failed`: the retry's and the delivery check's look in Twilio's
-- Messages list. Those tested "any error code but 429" instead, so a send that provably never
-- reached Twilio (no connection: no code at all) was looked up too, and an admin's reply
-- refused so had its reason ("not sent: Twilio API unreachable …") replaced by the list's
-- generic "Twilio has no record of it". Meaningful with status `send_failed`; each failed
-- send writes it anew.
alter table messages add column maybe_sent boolean not null default false;

-- Failed sends recorded before: a 5xx is the one failure whose text says "unavailable (HTTP".
update messages set maybe_sent = true
where status = 'send_failed' and error_message like 'not sent: Twilio is unavailable (HTTP %';
