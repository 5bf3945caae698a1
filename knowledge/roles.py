"""What the knowledge console grants each console role (``bailing.roles``).

Every role may read knowledge bases and run their hit test (a read that writes nothing and is not
audited); adding, uploading and deleting documents and enabling or deleting a knowledge base is
``knowledge.manage_knowledgebase``, administrators only.
"""

from __future__ import annotations

from bailing.roles import ADMINISTRATOR, APPROVER, AUDITOR

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    ADMINISTRATOR: ("knowledge.view_knowledgebase", "knowledge.manage_knowledgebase"),
    APPROVER: ("knowledge.view_knowledgebase",),
    AUDITOR: ("knowledge.view_knowledgebase",),
}
