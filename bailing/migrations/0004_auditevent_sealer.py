"""The audit chain is assigned by a sealer instead of at append (docs/audit.md).

Events are appended unsealed (chain columns NULL, no lock); the sealer fills ``chain_seq``,
``prev_hash`` and ``chain_hash`` once. Existing events were chained in id order under the old global
lock, so they get ``chain_seq`` 1..n in id order and keep their hashes: they verify as before.

The append-only trigger now also guards INSERT (a new event carries no ``chain_seq``; chain hashes
sent by a process still running the previous version are cleared, so its event is sealed like any
other) and allows exactly one UPDATE per event: the sealer's fill of the three chain columns of an
unsealed event, every other column unchanged. Everything else, DELETE included, is refused.

The backfill rewrites every existing row once in this migration's transaction. Going back is
refused unless every event is sealed (``manage.py approvals_audit_verify`` seals them) and the seal
order is still the id order: the old schema chained in id order, and dropping ``chain_seq`` would
lose the order of events sealed after a late commit, breaking the chain.
"""

from django.db import migrations, models

BACKFILL = """
ALTER TABLE bailing_auditevent DISABLE TRIGGER bailing_auditevent_append_only;
UPDATE bailing_auditevent AS e SET chain_seq = numbered.position
    FROM (SELECT id, row_number() OVER (ORDER BY id) AS position FROM bailing_auditevent) AS numbered
    WHERE e.id = numbered.id;
ALTER TABLE bailing_auditevent ENABLE TRIGGER bailing_auditevent_append_only;
"""

TRIGGER = """
CREATE OR REPLACE FUNCTION bailing_auditevent_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.chain_seq IS NOT NULL THEN
            RAISE EXCEPTION 'audit events are appended unsealed' USING ERRCODE = 'insufficient_privilege';
        END IF;
        NEW.prev_hash := NULL;
        NEW.chain_hash := NULL;
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE'
       AND OLD.chain_seq IS NULL AND OLD.prev_hash IS NULL AND OLD.chain_hash IS NULL
       AND NEW.chain_seq IS NOT NULL AND NEW.prev_hash IS NOT NULL AND NEW.chain_hash IS NOT NULL
       AND (to_jsonb(NEW) - 'chain_seq' - 'prev_hash' - 'chain_hash')
           = (to_jsonb(OLD) - 'chain_seq' - 'prev_hash' - 'chain_hash') THEN
        RETURN NEW;  -- the sealer's one-time fill of the chain columns
    END IF;
    RAISE EXCEPTION 'audit events are append-only' USING ERRCODE = 'insufficient_privilege';
END
$$ LANGUAGE plpgsql;
DROP TRIGGER bailing_auditevent_append_only ON bailing_auditevent;
CREATE TRIGGER bailing_auditevent_append_only
    BEFORE INSERT OR UPDATE OR DELETE ON bailing_auditevent
    FOR EACH ROW EXECUTE FUNCTION bailing_auditevent_append_only();
"""

REVERSE_GUARD = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM bailing_auditevent WHERE chain_seq IS NULL) THEN
        RAISE EXCEPTION 'unsealed audit events: seal them (approvals_audit_verify) before reversing 0004';
    END IF;
    IF EXISTS (
        SELECT 1 FROM (
            SELECT chain_seq, row_number() OVER (ORDER BY id) AS position FROM bailing_auditevent
        ) AS sealed WHERE sealed.chain_seq <> sealed.position
    ) THEN
        RAISE EXCEPTION 'the audit chain is no longer in id order: reversing 0004 would break it';
    END IF;
END
$$;
"""

TRIGGER_BACK = """
CREATE OR REPLACE FUNCTION bailing_auditevent_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only' USING ERRCODE = 'insufficient_privilege';
END
$$ LANGUAGE plpgsql;
DROP TRIGGER bailing_auditevent_append_only ON bailing_auditevent;
CREATE TRIGGER bailing_auditevent_append_only
    BEFORE UPDATE OR DELETE ON bailing_auditevent
    FOR EACH ROW EXECUTE FUNCTION bailing_auditevent_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("bailing", "0003_auditevent_request_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="chain_seq",
            field=models.BigIntegerField(blank=True, null=True, unique=True),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="chain_hash",
            field=models.CharField(blank=True, max_length=64, null=True, unique=True),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="prev_hash",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(TRIGGER, reverse_sql=TRIGGER_BACK),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(
                condition=models.Q(("chain_seq__isnull", True)), fields=["id"], name="bailing_audit_unsealed"
            ),
        ),
        # Last, so that going back checks first.
        migrations.RunSQL(migrations.RunSQL.noop, reverse_sql=REVERSE_GUARD),
    ]
