"""A browser session ends on the server when its learner signs out: each account's session epoch,
which a session cookie names and sign-out moves on. One defaulted column: an existing gradebook
upgrades in place; a browser signed in before it signs in again (its cookie names no epoch).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ALTER TABLE ADD COLUMN, never a batch "move and copy" (see 0004)
    op.add_column('accounts', sa.Column('session_epoch', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    op.drop_column('accounts', 'session_epoch')
