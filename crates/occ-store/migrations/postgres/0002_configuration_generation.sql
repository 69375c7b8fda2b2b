-- A Configuration's generation only ever moves forward: a write that lowers it, or changes the
-- Secret bindings under the same generation, is refused. Revisions and the Configuration Driver
-- name a document by its generation, so a generation that went back (or changed meaning) would
-- make two different documents answer to one name.

SET LOCAL search_path = occ, pg_catalog;

CREATE TRIGGER configuration_generation_increases
  BEFORE UPDATE ON occ.configurations
  FOR EACH ROW
  WHEN (NEW.generation < OLD.generation
        OR (NEW.generation = OLD.generation AND NEW.secret_bindings IS DISTINCT FROM OLD.secret_bindings))
  EXECUTE FUNCTION occ.reject_row_mutation('configuration_generation_increases',
    'a Configuration''s generation only increases, and its content changes only with a new generation');
