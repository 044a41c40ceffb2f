// Commands for personal data (GDPR): erase a person, export what is held about them. What
// they do is in src/privacy/, loaded when one runs. Both write to the audit log.
import type { Command } from './command.ts';

export const privacyCommands: Command[] = [
  {
    name: 'forget',
    args: '<phone>',
    group: 'Personal data',
    summary: 'erase a person: contact, conversations, messages, person record, embeddings and the jobs about them',
    options: {
      yes: { type: 'boolean', description: 'erase without asking (needed when not at a terminal)' },
      lift: { type: 'boolean', description: 'erase nothing: let people syncs and imports bring back a person erased before (they came back and consent); takes their number or, where an import says their email address matched, the address' },
    },
    example: 'aiq forget +31612345678',
    run: async (input, config) => (await import('./privacy-actions.ts')).forget(input, config),
  },
  {
    name: 'export',
    args: '<phone>',
    group: 'Personal data',
    summary: 'everything held about a person, as one JSON document',
    options: { output: { type: 'string', value: 'FILE', description: 'write it to FILE (readable by you only)', default: 'standard output' } },
    example: 'aiq export +31612345678 --output anna.json',
    run: async (input, config) => (await import('./privacy-actions.ts')).exportPerson(input, config),
  },
];
