-- The audit journal: one row per record, the same line (JSON, chained by
-- seq, prev and hash) the journal file holds. The counts, holds and
-- no-downgrade marks are derived from it, as from the file.
CREATE TABLE planlock_audit (
    seq  bigint PRIMARY KEY CHECK (seq > 0),
    line text   NOT NULL
);

-- The chain's head, one row: every writer locks it (SELECT ... FOR UPDATE)
-- for the length of its transaction, which serializes the decisions of
-- all replicas and keeps the chain linear. It is also the anchor: a journal
-- that ends before it was cut.
CREATE TABLE planlock_head (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq  bigint  NOT NULL,
    hash text    NOT NULL
);
INSERT INTO planlock_head (seq, hash)
    VALUES (0, '0000000000000000000000000000000000000000000000000000000000000000');

-- Records are appended, never changed.
CREATE FUNCTION planlock_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'planlock_audit is append-only: % refused', TG_OP;
END $$;
CREATE TRIGGER planlock_audit_append_only BEFORE UPDATE OR DELETE ON planlock_audit
    FOR EACH ROW EXECUTE FUNCTION planlock_audit_append_only();
CREATE TRIGGER planlock_audit_no_truncate BEFORE TRUNCATE ON planlock_audit
    FOR EACH STATEMENT EXECUTE FUNCTION planlock_audit_append_only();
