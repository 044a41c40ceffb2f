-- The line an import found its header on. Excel exports often put a title above the header
-- ("Personeelslijst december 2026" in A1, the column names in row 3); the import took the
-- title for the header and failed with "the header has no name or phone column (found:
-- "Personeelslijst december 2026")". It now looks for the header in the first lines and
-- skips what is above it (src/knowledge/csv-import.ts), and says so from this column.
alter table imports
  add column header_line int not null default 1;
