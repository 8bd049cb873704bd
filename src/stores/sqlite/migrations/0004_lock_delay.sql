-- leasehold SQLite schema, version 4: lock-delay. Forward-only. Placeholder: {{table}}.
--
-- lock_delay_us: how long after an expiry (not a release: a release clears lease_id) the key
-- stays ungrantable, in µs of the machine's monotonic clock, like expires_us. 0 for every row
-- written before this migration and every grant without a delay. Adding a column with a
-- constant default rewrites no row.
ALTER TABLE {{table}} ADD COLUMN lock_delay_us INTEGER NOT NULL DEFAULT 0;
