-- The catalog's pointer store, version 3 (SQLite): the pointer row also keeps the handle it
-- showed before, so that the one UPDATE of the common publish (decision 024, as decision 021
-- did on PostgreSQL) can check the mark, the key, the expected version and the object, move
-- the pointer and answer the previous handle. Measured before, per publish with
-- synchronous = OFF: six statements of its own (two reads, four writes) and about 5x the CPU
-- of the bare fenced UPDATE. Version 2 processes keep publishing side by side: they neither
-- read nor need this column.

ALTER TABLE {{pointer}} ADD COLUMN previous_handle TEXT;
