-- The catalog's pointer store, version 2 (PostgreSQL): the publish of the one-message form.
-- The high-water mark's check and the pointer move go out together as one implicit
-- transaction, so a publish that must not happen cannot answer a status and let the mark
-- commit: it raises SQLSTATE LHC01 instead (MESSAGE the status, DETAIL a JSON object with
-- currentVersion and currentKey), which rolls back the whole message. Answers the applied
-- row otherwise.
CREATE OR REPLACE FUNCTION {{publish_or_raise_fn}}(
  p_name text, p_handle text, p_token bigint, p_lease_key text, p_lease_id text,
  p_expected bigint, p_idempotency_key text)
RETURNS TABLE (version bigint, previous_handle text)
LANGUAGE plpgsql AS $fn$
DECLARE
  r record;
BEGIN
  SELECT * INTO r FROM {{publish_fn}}(p_name, p_handle, p_token, p_lease_key, p_lease_id,
    p_expected, p_idempotency_key);
  IF r.status IS DISTINCT FROM 'applied' THEN
    RAISE EXCEPTION USING ERRCODE = 'LHC01', MESSAGE = COALESCE(r.status, 'no row'),
      DETAIL = json_build_object('currentVersion', r.current_version::text,
                                 'currentKey', r.current_key)::text;
  END IF;
  RETURN QUERY SELECT r.version, r.previous_handle;
END
$fn$;
