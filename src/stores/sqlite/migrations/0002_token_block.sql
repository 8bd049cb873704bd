-- leasehold SQLite schema, version 2: token blocks (decision 007). Forward-only.
-- Placeholders: {{table}} (escaped table name), {{block_guard}} (escaped trigger name).
--
-- token_block: how many tokens the last grant reserved, its own included; NULL means 1 (every
-- row written before this migration, and every grant without a block). The block is
-- token … token + token_block − 1: `token` stays the holder's own token (renew and release
-- compare it) and the next grant gets token + token_block. Adding a nullable column rewrites
-- no row.
ALTER TABLE {{table}} ADD COLUMN token_block INTEGER CHECK (token_block IS NULL OR token_block >= 1);

-- A process still running the previous version (a rolling upgrade: several processes share
-- the file) grants with `token + 1` and knows nothing of token_block, so it would hand out a
-- token of a reserved block. This trigger refuses such a write instead (the old process
-- answers unavailable for that key until it is upgraded). Grants of this version always move
-- the token past the block and never fire it; renewals and releases do not set the token.
CREATE TRIGGER IF NOT EXISTS {{block_guard}}
BEFORE UPDATE OF token ON {{table}}
WHEN OLD.token_block > 1 AND NEW.token > OLD.token AND NEW.token < OLD.token + OLD.token_block
BEGIN
  SELECT RAISE(ABORT, 'leasehold: this token is reserved by a token block; upgrade leasehold in this process');
END;
