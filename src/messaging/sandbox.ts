// Twilio's WhatsApp sandbox number, in a module of its own: the CLI names it without
// loading the messaging modules (`aiq --help` stays fast).

/**
 * With no sender configured (TWILIO_WHATSAPP_FROM) it is the default one: what `aiq
 * simulate` writes to, so that its messages and the dashboard's Simulate land in one thread.
 */
export const SANDBOX_NUMBER = '+14155238886';
