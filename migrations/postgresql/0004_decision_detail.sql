-- PostgreSQL dialect of 0004: what a job's history needs of a decision without reading its event.
ALTER TABLE decision_index ADD COLUMN detail TEXT;
