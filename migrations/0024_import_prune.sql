-- People who left stayed: an import or a sync only ever added and updated people, so a
-- leaver's record stayed in the knowledge base, and when their phone number was given to
-- someone else, that stranger's replies carried the former employee's record until an
-- admin ran `aiq forget`. An import can now say that its file is the complete list
-- (`aiq import-people --prune`, the dashboard's checkbox, PEOPLE_SYNC_PRUNE for the sync):
-- people not in it are removed when it ends (src/knowledge/csv-import.ts, importPrune).
-- Off unless asked for: nothing is removed that no one asked to remove.
alter table imports
  add column prune boolean not null default false,
  -- People removed because the complete list did not name them.
  add column removed int not null default 0,
  -- Why a complete list removed no one although asked (a rejected row, a list too short).
  add column prune_note text;
