-- Voice notes cost money too: a transcription's usage goes in ai_usage (operation
-- 'transcribe', the purpose and subject of the reply job that ran it). Models billed by the
-- length of the audio (whisper-1) report seconds, not tokens: audio_seconds; models billed
-- by tokens (gpt-4o-transcribe) report tokens as the others do.
alter table ai_usage drop constraint ai_usage_operation_check;
alter table ai_usage add constraint ai_usage_operation_check check (operation in ('chat', 'embed', 'transcribe'));
alter table ai_usage add column audio_seconds numeric check (audio_seconds >= 0);
