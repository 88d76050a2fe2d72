// Package inbox is fairrelay's receiver side over HTTP and in process: the
// composition of [receiverstore] (the idempotent receiver), [webhook]
// (Standard Webhooks signatures) and [relay] (the runtime's Handler).
//
// [NewServer] is an http.Handler that receives the relay's deliveries
// (docs/contract.md, "Delivery over HTTP"): it reads the body under a size
// cap, verifies both signatures and the timestamp window, parses the event's
// ID, flow and sequence number from the headers, calls
// [receiverstore.Store.Receive] and answers with a documented status and a
// small JSON body:
//
//	200 {"outcome":"accepted"} | {"outcome":"duplicate"}
//	409 {"outcome":"conflict"} | {"outcome":"gap"}
//	422 {"outcome":"unsupported_delta"}
//	400 {"error":"invalid_body"} | {"error":"invalid_message"} | {"error":"invalid_header"}
//	401 {"error":"unauthorized"}
//	405 {"error":"method_not_allowed"}
//	413 {"error":"too_large"}
//	503 {"error":"effect_failed"} | {"error":"canceled"}
//	500 {"error":"internal"}
//
// A refusal before the store (method, size, signature, headers) touches no
// database. Internal errors never reach the client: their detail goes to the
// server's log only.
//
// [Local] is the same mapping for a relay that delivers in process, without
// HTTP: what the experiment does with its receiver.
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
