-- settle regression suite: setup. Every later file runs in the same database.
CREATE EXTENSION settle;
-- try(sql): run a statement, return 'ok' or 'ERROR <SQLSTATE>: <message>'.
-- Tests assert the SQLSTATE (the contract) and show the message (for humans).
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- the functions the extension installs, with their security mode
SELECT p.proname, p.prosecdef AS security_definer, pg_get_function_identity_arguments(p.oid) AS args
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'settle'
ORDER BY 1;
