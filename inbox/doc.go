// Package inbox is fairrelay's receiver side over HTTP and in process: the
// composition of [receiverstore] (the idempotent receiver), [webhook]
// (Standard Webhooks signatures) and [relay] (the runtime's Handler).
//
// [NewServer] is an http.Handler that receives the relay's deliveries
// (docs/contract.md, "Delivery over HTTP"): it checks the Host header,
// answers only on its path (ServerOptions.Path; the metrics beside it to GET
// and HEAD only), reads the body under a size cap, verifies both signatures
// (with any of several secrets, for a rotation) and the timestamp window,
// parses the event's ID, flow and sequence number from the headers, calls
// [receiverstore.Store.Receive] and answers with a documented status and a
// small JSON body (docs/receiver-server.md):
//
//	200 {"outcome":"accepted"} | {"outcome":"duplicate"} | {"outcome":"pruned"}
//	409 {"outcome":"conflict"} | {"outcome":"gap"}
//	422 {"outcome":"unsupported_delta"}
//	400 {"outcome":"invalid_body"|"invalid_message"|"invalid_header","rule":"<rule>","error":"<words>"}
//	401 {"outcome":"unauthorized","error":"<words>"}
//	403 {"outcome":"host_not_allowed","error":"<words>"}
//	404 {"outcome":"not_found","error":"<words>"}
//	405 {"outcome":"method_not_allowed","error":"<words>"}
//	413 {"outcome":"too_large","error":"<words>"}
//	503 {"outcome":"effect_failed"|"canceled","error":"<words>"}
//	500 {"outcome":"internal","error":"<words>"}
//
// The rule of a 400 is a receiver.BodyRule for invalid_body (not_json,
// not_an_integer, delta_out_of_range, ...) or one of the Rule* constants.
// A refusal before the store (host, path, method, size, signature,
// headers) touches no database. Internal errors never reach the client:
// their detail goes to the server's log only. Every refusal is logged at
// WARN with its reason (and the event, once verified), paced per reason.
//
// With ServerOptions.Retention set, the [Server] also prunes the receiver's
// receipts older than that window in the background (docs/contract.md
// §7.9), in bounded batches, each one short transaction, until
// [Server.Close]; a redelivery of a pruned receipt's event is answered 200
// {"outcome":"pruned"} and applies nothing. The deleted receipts are
// counted in fairrelay_receiver_pruned_total.
//
// relay.NewLocal (in the relay module, which this one never imports) is the
// same mapping for a relay that delivers in process, without HTTP: what
// the experiment does with its receiver.
//
// [NewBatcher] gives in-process delivery group commit: a [Batcher] is a
// [Receiver] that gathers concurrent Receive calls into one ReceiveBatch of
// a [BatchReceiver] (*receiverstore.Store, *pgreceiverstore.Store), so the
// relay's concurrent handlers share one transaction and one commit instead
// of one fsync each. Each caller still gets the outcome or error its own
// Receive would give; a batch that fails as a whole (an effect's error) is
// received again message by message, so that the failure is only its own
// caller's. A relay in process is then
//
//	b := inbox.NewBatcher(store, inbox.BatcherOptions{})
//	defer b.Close()
//	r, err := relay.New(queue, relay.NewLocal(b), relay.Options{Concurrency: 16})
//
// The handlers a relay starts together (relay.WaveOf) commit together:
// a batch waits, up to WaveWait, for the rest of a wave it holds part of.
// docs/runtime.md ("In-process delivery and group commit") gives the
// measurements and how to tune MaxBatch, WaveWait and Linger.
package inbox
