// Commands that fill the knowledge base: add-document, import-people (a CSV, run here with
// progress) and reembed (stale records; with --switch, a new provider, model or dimension
// after a confirmation). Progress is drawn on a terminal only; every command ends with a
// plain summary. What they do is in knowledge-actions.ts, loaded when one runs.
import type { PersonField } from '../knowledge/csv-import.ts';
import type { Command } from './command.ts';

export const FIELDS: PersonField[] = ['name', 'phone', 'email', 'department', 'role'];

/** Registered in src/cli.ts. */
export const knowledgeCommands: Command[] = [
  {
    name: 'add-document',
    args: '<file>',
    group: 'Knowledge',
    summary: 'add or update a knowledge document, plain text or Markdown (chunked; embedded by the worker)',
    options: {
      title: { type: 'string', value: 'T', description: 'its title; a document of the same title is replaced', default: 'the file name' },
      tag: { type: 'string', multiple: true, value: 'TAG', description: 'a tag; an assistant profile with documentTags uses only documents with one of them' },
    },
    example: 'aiq add-document handbook.md --title "Employee handbook"\naiq add-document it-handboek.md --tag it',
    run: async (input, config) => (await import('./knowledge-actions.ts')).addDocument(input, config),
  },
  {
    name: 'remove-document',
    args: '"<title>"',
    group: 'Knowledge',
    summary: 'remove a knowledge document and its chunks: replies stop using it at once',
    example: 'aiq remove-document "Employee handbook 2025"',
    run: async (input, config) => (await import('./knowledge-actions.ts')).removeDocument(input, config),
  },
  {
    name: 'import-people',
    args: '<file.csv>',
    group: 'Knowledge',
    summary: `import employees from CSV by phone (columns ${FIELDS.join(', ')}; others become attributes)`,
    options: {
      map: { type: 'string', multiple: true, value: '"Header=field"', description: `read a column as one of ${FIELDS.join(', ')}` },
      prune: { type: 'boolean', description: 'the file is the complete list: remove the people not in it (no one when a row is rejected)' },
    },
    example: 'aiq import-people people.csv --map "Mobiel nummer=phone"\naiq import-people all-staff.csv --prune',
    run: async (input, config) => (await import('./knowledge-actions.ts')).importPeople(input, config),
  },
  {
    name: 'search',
    args: '"<question>"',
    group: 'Knowledge',
    summary: 'the chunks a reply to this question would use, ranked, with their scores',
    options: {
      k: { type: 'string', value: 'N', description: 'how many chunks', default: 'RAG_TOP_K' },
      mode: { type: 'string', value: 'M', description: 'hybrid, vector or lexical', default: 'RAG_MODE' },
      json: { type: 'boolean', description: 'print JSON instead of text' },
    },
    example: 'aiq search "hoeveel vakantiedagen heb ik?"\naiq search "P2 storing" --mode lexical --k 10 --json',
    run: async (input, config) => (await import('./knowledge-actions.ts')).search(input, config),
  },
  {
    name: 'reembed',
    group: 'Knowledge',
    summary: 'embed the records whose embedding is missing or stale',
    options: {
      all: { type: 'boolean', description: 'every record, stale or not' },
      switch: { type: 'boolean', description: 'move the knowledge base to the configured provider, model and dimension: drops every embedding, then embeds all (asks first)' },
      yes: { type: 'boolean', description: 'confirm --switch without asking (needed when not at a terminal)' },
    },
    example: 'aiq reembed\nEMBEDDING_DIMENSIONS=512 aiq reembed --switch',
    run: async (input, config) => (await import('./knowledge-actions.ts')).reembed(input, config),
  },
];
