"""The system of record: SQL through SQLModel, one session per unit of work, migrations.

May import: `dreamer.core`."""
