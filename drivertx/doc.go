// Package drivertx runs short write transactions on one database/sql
// connection through the driver's own interfaces, without database/sql's Tx.
//
// fairrelay's stores commit one small transaction per operation. On these,
// database/sql's bookkeeping cost more CPU than SQLite's own work: a Tx
// starts a goroutine to watch its context, the driver starts another to
// interrupt BEGIN, and every statement is bound to the Tx again and converts
// its arguments by reflection. A [Conn] keeps one connection out of the
// pool, prepares the write statements on it once, and runs [Conn.Tx] on it:
// the same SQL, BEGIN and COMMIT (and so the same durability), less CPU.
// Reads keep using database/sql.
//
// Both queuestore and receiverstore use it, so that neither carries a copy
// and neither imports the other. It imports nothing outside the standard
// library; its tests use modernc.org/sqlite.
package drivertx
