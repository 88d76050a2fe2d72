package conformance

import (
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
)

// A flow moves whole between stores of two backends (docs/contract.md
// §7.10: a Transplanter's flows move "to another store of the same
// backend or another"): the round trip of Transplant_7_10_RoundTrip, from
// SQLite to PostgreSQL and back.
func TestTransplantAcrossBackends(t *testing.T) {
	pgtest.Require(t)
	sq, pg := sqliteQueue(), pgQueue()
	t.Run("SQLiteToPostgres", func(t *testing.T) { transplantRoundTrip(t, sq.open(t), pg.open(t)) })
	t.Run("PostgresToSQLite", func(t *testing.T) { transplantRoundTrip(t, pg.open(t), sq.open(t)) })
}
