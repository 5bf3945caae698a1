"""Row versions for the per-process caches of the hot path (bailing.versioned).

``version`` on routes and tool providers is set by a BEFORE INSERT OR UPDATE trigger to the next
value of one shared sequence, so it changes on every write, even one made with raw SQL, and a
deleted and re-created row never gets a version an earlier row had (the sequence is not
transactional: rolled-back writes never hand out a value twice either). Any INSERT, UPDATE or
DELETE of a provider's tools touches the provider row once per statement, which bumps its version.
"""

from django.db import migrations, models

FORWARD = """
CREATE SEQUENCE IF NOT EXISTS bailing_row_version_seq;

CREATE OR REPLACE FUNCTION bailing_row_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := nextval('bailing_row_version_seq');
    RETURN NEW;
END
$$;

UPDATE agent_runtime_route SET version = nextval('bailing_row_version_seq');
UPDATE agent_runtime_toolprovider SET version = nextval('bailing_row_version_seq');

CREATE TRIGGER agent_runtime_route_version BEFORE INSERT OR UPDATE ON agent_runtime_route
    FOR EACH ROW EXECUTE FUNCTION bailing_row_version_bump();
CREATE TRIGGER agent_runtime_toolprovider_version BEFORE INSERT OR UPDATE ON agent_runtime_toolprovider
    FOR EACH ROW EXECUTE FUNCTION bailing_row_version_bump();

CREATE OR REPLACE FUNCTION agent_runtime_providertool_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE agent_runtime_toolprovider SET version = 0
         WHERE id IN (SELECT provider_id FROM new_rows);
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE agent_runtime_toolprovider SET version = 0
         WHERE id IN (SELECT provider_id FROM old_rows);
    ELSE
        UPDATE agent_runtime_toolprovider SET version = 0
         WHERE id IN (SELECT provider_id FROM old_rows UNION SELECT provider_id FROM new_rows);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER agent_runtime_providertool_insert AFTER INSERT ON agent_runtime_providertool
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION agent_runtime_providertool_touch();
CREATE TRIGGER agent_runtime_providertool_update AFTER UPDATE ON agent_runtime_providertool
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION agent_runtime_providertool_touch();
CREATE TRIGGER agent_runtime_providertool_delete AFTER DELETE ON agent_runtime_providertool
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION agent_runtime_providertool_touch();
"""

REVERSE = """
DROP TRIGGER IF EXISTS agent_runtime_providertool_insert ON agent_runtime_providertool;
DROP TRIGGER IF EXISTS agent_runtime_providertool_update ON agent_runtime_providertool;
DROP TRIGGER IF EXISTS agent_runtime_providertool_delete ON agent_runtime_providertool;
DROP FUNCTION IF EXISTS agent_runtime_providertool_touch();
DROP TRIGGER IF EXISTS agent_runtime_route_version ON agent_runtime_route;
DROP TRIGGER IF EXISTS agent_runtime_toolprovider_version ON agent_runtime_toolprovider;
DROP FUNCTION IF EXISTS bailing_row_version_bump();
DROP SEQUENCE IF EXISTS bailing_row_version_seq;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agent_runtime", "0007_oauth_clients"),
    ]

    operations = [
        migrations.AddField(
            model_name="route",
            name="version",
            field=models.BigIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name="toolprovider",
            name="version",
            field=models.BigIntegerField(default=0, editable=False),
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
