"""Make the audit ledger append-only in the database itself: UPDATE and DELETE of an audit event
raise, whoever issues them. (TRUNCATE is a table owner's act and stays possible; the hash chain
still shows every removal except of the newest events.)"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION approvals_auditevent_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only' USING ERRCODE = 'insufficient_privilege';
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER approvals_auditevent_append_only
    BEFORE UPDATE OR DELETE ON approvals_auditevent
    FOR EACH ROW EXECUTE FUNCTION approvals_auditevent_append_only();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS approvals_auditevent_append_only ON approvals_auditevent;
DROP FUNCTION IF EXISTS approvals_auditevent_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("approvals", "0001_initial")]
    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
