"""``KnowledgeBase.version``, bumped by the shared row-version trigger (agent_runtime 0008), so the
per-process knowledge-scope cache sees any change of a base, even one made with raw SQL."""

from django.db import migrations, models

FORWARD = """
UPDATE knowledge_knowledgebase SET version = nextval('bailing_row_version_seq');
CREATE TRIGGER knowledge_knowledgebase_version BEFORE INSERT OR UPDATE ON knowledge_knowledgebase
    FOR EACH ROW EXECUTE FUNCTION bailing_row_version_bump();
"""

REVERSE = "DROP TRIGGER IF EXISTS knowledge_knowledgebase_version ON knowledge_knowledgebase;"


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0002_worker_heartbeat"),
        ("agent_runtime", "0008_row_versions"),
    ]

    operations = [
        migrations.AddField(
            model_name="knowledgebase",
            name="version",
            field=models.BigIntegerField(default=0, editable=False),
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
