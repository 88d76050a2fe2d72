package receiverstore

import "github.com/fairrelay/fairrelay/receiver"

// The store keeps the whole receiver contract (docs/contract.md §3).
var _ receiver.Store = (*Store)(nil)
