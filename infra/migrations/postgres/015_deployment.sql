-- The deployment this database belongs to (one row, written by the first process to start) and
-- where its event history lives: the embedded engine of one worker host, or a ClickHouse server.
-- Redis (under the queue prefix) and ClickHouse hold the same id; a process whose three parts
-- disagree refuses to start (shared/deployment.ts).
CREATE TABLE deployment (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  id uuid NOT NULL,
  history text CHECK (history IN ('embedded', 'server')),
  -- The embedded engine's place, `host:directory`, named by the process that claimed it.
  engine_at text,
  created_at timestamptz NOT NULL DEFAULT now()
);
