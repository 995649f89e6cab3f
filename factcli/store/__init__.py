"""The SQLite store: the database and its migrations, rows to records and back, NaN-free JSON, and the
secrets rule every stored or exported byte goes through."""
