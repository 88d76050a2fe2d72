// Package receiver is the vocabulary every fairrelay receiver backend
// shares: Message, Outcome, the conflict rules, the strict {"delta": N}
// body parser with the rule each refusal breaks (BodyRule, BodyError), the
// input limits and the sentinel errors (docs/contract.md §3).
//
// It holds no store. The SQLite receiver (receiverstore) and the
// PostgreSQL receiver (pgreceiverstore) both speak these types, so code
// above them takes either and errors.Is(err, receiver.ErrInvalidBody)
// holds whichever store returned err. It imports nothing of fairrelay's.
package receiver
