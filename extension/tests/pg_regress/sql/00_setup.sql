-- settle regression suite: setup. Every later file runs in the same database.
CREATE EXTENSION settle;
-- try(sql): run a statement, return 'ok' or 'ERROR <SQLSTATE>: <message>' (and the
-- DETAIL, when the error has one). Tests assert the SQLSTATE (the contract) and
-- show the message (for humans).
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  detail text;
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM
         || CASE WHEN detail <> '' THEN ' DETAIL: ' || detail ELSE '' END;
END $$;
-- the functions the extension installs, with their security mode (the SQL
-- edition's internal _settle_* helpers aside)
SELECT p.proname, p.prosecdef AS security_definer, pg_get_function_identity_arguments(p.oid) AS args
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'settle'
WHERE p.proname NOT LIKE '\_settle\_%'
ORDER BY 1;
