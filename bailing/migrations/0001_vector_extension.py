"""Create the pgvector extension where the server has it; nothing requires it (lexical fallback)."""

from django.db import migrations

CREATE_IF_AVAILABLE = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        CREATE EXTENSION IF NOT EXISTS vector;
    END IF;
END
$$;
"""


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [migrations.RunSQL(CREATE_IF_AVAILABLE, reverse_sql=migrations.RunSQL.noop)]
