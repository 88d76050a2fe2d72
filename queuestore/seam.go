package queuestore

import "github.com/fairrelay/fairrelay/queue"

// The store keeps the whole queue contract, with every capability the
// queue module names (docs/contract.md §2, §7).
var (
	_ queue.Store         = (*Store)(nil)
	_ queue.Weighter      = (*Store)(nil)
	_ queue.SettleClaimer = (*Store)(nil)
	_ queue.Pager         = (*Store)(nil)
	_ queue.Waiter        = (*Store)(nil)
	_ queue.Pauser        = (*Store)(nil)
	_ queue.Pruner        = (*Store)(nil)
)
