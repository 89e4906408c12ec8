-- What a job's history needs of a decision without reading its event (daemon/runtime/job_history.py):
-- for decision.job_explained '+' then its reason codes, most important first, comma-separated ('-' when
-- the job no longer waits); for decision.podgroup_status the phase.  NULL for the other decisions, and
-- for rows indexed before this migration (the history then reads the event instead).
ALTER TABLE decision_index ADD COLUMN detail TEXT;
