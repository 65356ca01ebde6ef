-- The transactional outbox's table in the producer's PostgreSQL database (docs/outbox.md).
-- Insert an event here in the same transaction as the business change; hookd's relay
-- (--outbox-url) publishes committed rows and deletes them. Safe to run again.
CREATE TABLE IF NOT EXISTS hookd_outbox (
  seq              bigserial PRIMARY KEY,
  event_id         text NOT NULL DEFAULT ('ob_' || replace(gen_random_uuid()::text, '-', '')),
  tenant           text NOT NULL,
  type             text NOT NULL,
  payload          json NOT NULL,   -- json keeps the text as written (1e20 stays 1e20); jsonb works too
  occurred_at      timestamptz NOT NULL DEFAULT now(),
  ordering_key     text,
  ordering_version bigint,
  channels         text[],
  schema_version   text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  relay_error      text,
  relay_failed_at  timestamptz
);

-- The relay reads the rows still waiting, oldest first.
CREATE INDEX IF NOT EXISTS hookd_outbox_waiting ON hookd_outbox (seq) WHERE relay_error IS NULL;

-- Wakes the relay when rows are committed (NOTIFY is delivered at the commit). Its price is the
-- producer's: PostgreSQL serialises the commits of the transactions that ran NOTIFY, and refuses
-- PREPARE TRANSACTION after one. At high outbox rates behind a synchronous standby, or with
-- two-phase commit, drop it (DROP TRIGGER hookd_outbox_notify ON hookd_outbox): the relay
-- polls (--outbox-poll-ms; docs/outbox.md).
CREATE OR REPLACE FUNCTION hookd_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('hookd_outbox', '');
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER hookd_outbox_notify AFTER INSERT ON hookd_outbox
  FOR EACH STATEMENT EXECUTE FUNCTION hookd_outbox_notify();
