package conformance

// receiverClauses are the clauses RunReceiver runs, named as the tests of
// receiverstore they were ported from.
var receiverClauses = []receiverClause{
	{"Receive_Accepted_AppliesEffectInOneStep", receiverReceive_Accepted_AppliesEffectInOneStep},
	{"Receive_Rule1_DuplicateChangesNothing", receiverReceive_Rule1_DuplicateChangesNothing},
	{"Receive_Rule1_SameIDOtherwiseDifferentIsConflict", receiverReceive_Rule1_SameIDOtherwiseDifferentIsConflict},
	{"Receive_Rule2_SeqTakenByOtherIDIsConflict", receiverReceive_Rule2_SeqTakenByOtherIDIsConflict},
	{"Receive_Rule3_GapChangesNothingAndSkipsNothing", receiverReceive_Rule3_GapChangesNothingAndSkipsNothing},
	{"Receive_Rule4_BehindWithoutReceiptIsConflict", receiverReceive_Rule4_BehindWithoutReceiptIsConflict},
	{"Receive_Rule5_UnsupportedDeltaChangesNothing", receiverReceive_Rule5_UnsupportedDeltaChangesNothing},
	{"Receive_RaisedMaxDeltaAcceptsTheSameMessage", receiverReceive_RaisedMaxDeltaAcceptsTheSameMessage},
	{"Receive_RuleOrder", receiverReceive_RuleOrder},
	{"Receive_RuleOrder_Rule4BeforeRule5", receiverReceive_RuleOrder_Rule4BeforeRule5},
	{"Conflicts_EachDistinctMessageRecordedOnce", receiverConflicts_EachDistinctMessageRecordedOnce},
	{"Receive_InvalidBody", receiverReceive_InvalidBody},
	{"ParseDelta_Accepts", receiverParseDelta_Accepts},
	{"Receive_InvalidMessage", receiverReceive_InvalidMessage},
	{"Flows_ListsTotalsAndNextExpected", receiverFlows_ListsTotalsAndNextExpected},
	{"Snapshot_StableOrderAndReadableJSON", receiverSnapshot_StableOrderAndReadableJSON},
	{"Snapshot_EmptyStore", receiverSnapshot_EmptyStore},
	{"Snapshot_OneReadTransactionUnderConcurrentWrites", receiverSnapshot_OneReadTransactionUnderConcurrentWrites},
	{"ReceiveBatch_SeesEarlierItemsOfTheBatch", receiverReceiveBatch_SeesEarlierItemsOfTheBatch},
	{"ReceiveBatch_BadItemGetsItsOwnError", receiverReceiveBatch_BadItemGetsItsOwnError},
	{"ReceiveBatch_MatchesSuccessiveReceiveOnATwin", receiverReceiveBatch_MatchesSuccessiveReceiveOnATwin},
	{"Receive_NamesWithoutEdgeSpaces", receiverReceive_NamesWithoutEdgeSpaces},
	// Retention (docs/contract.md §7.9), r_retention.go.
	{"Prune_DeletesOnlyReceiptsAcceptedBefore", receiverPrune_DeletesOnlyReceiptsAcceptedBefore},
	{"Prune_LimitAndMore", receiverPrune_LimitAndMore},
	{"Prune_TotalsAndNextExpectedSurvive", receiverPrune_TotalsAndNextExpectedSurvive},
	{"Receive_PrunedRedeliveryChangesNothing", receiverReceive_PrunedRedeliveryChangesNothing},
	{"ReceiveBatch_PrunedRedeliveryChangesNothing", receiverReceiveBatch_PrunedRedeliveryChangesNothing},
	{"Receive_AbovePrunedMarkRulesUnchanged", receiverReceive_AbovePrunedMarkRulesUnchanged},
	{"Receive_AbovePrunedMarkWithoutReceiptIsSeqBehind", receiverReceive_AbovePrunedMarkWithoutReceiptIsSeqBehind},
	{"Prune_MarkNeverLowered", receiverPrune_MarkNeverLowered},
	{"Prune_BadLimitIsInvalidOption", receiverPrune_BadLimitIsInvalidOption},
	{"Prune_ConcurrentRedeliveriesNeverApplyTwice", receiverPrune_ConcurrentRedeliveriesNeverApplyTwice},
}
