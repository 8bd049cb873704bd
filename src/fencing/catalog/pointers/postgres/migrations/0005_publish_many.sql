-- The catalog's pointer store, version 5 (PostgreSQL): publishes that meet in one process
-- go to the server as one call, one round trip and one commit (decision 024). Each publish
-- runs the publish function of version 4 unchanged, in its own subtransaction: a refusal
-- (stale_fence, duplicate, not_staged, version_conflict, wrong_key) rolls back that publish
-- alone and is answered as a row; any other error fails the whole call, and nothing of it
-- commits. The caller sends the publishes in name order, so that two calls lock pointer rows
-- in one order (no deadlock between them). Processes of versions 3 to 5 publish side by side.

CREATE OR REPLACE FUNCTION {{publish_many_fn}}(
  p_names text[], p_handles text[], p_tokens bigint[], p_lease_keys text[], p_lease_ids text[],
  p_expected bigint[], p_idempotency_keys text[], p_strict boolean)
RETURNS TABLE (ord integer, version bigint, previous_handle text,
  refused_state text, refused_message text, refused_detail text)
LANGUAGE plpgsql AS $fn$
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_names, 1), 0) LOOP
    ord := i; version := NULL; previous_handle := NULL;
    refused_state := NULL; refused_message := NULL; refused_detail := NULL;
    BEGIN
      SELECT f.version, f.previous_handle INTO version, previous_handle
        FROM {{publish_v3_fn}}(p_names[i], p_handles[i], p_tokens[i], p_lease_keys[i],
          p_lease_ids[i], p_expected[i], p_idempotency_keys[i], p_strict) f;
    EXCEPTION WHEN SQLSTATE 'LH001' OR SQLSTATE 'LHC01' THEN
      GET STACKED DIAGNOSTICS refused_state = RETURNED_SQLSTATE,
        refused_message = MESSAGE_TEXT, refused_detail = PG_EXCEPTION_DETAIL;
    END;
    RETURN NEXT;
  END LOOP;
END
$fn$;
