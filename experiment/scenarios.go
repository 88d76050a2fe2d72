package experiment

// Scenarios returns every scenario, the 25 of the default contract first, in their original order. Each has
// a golden file testdata/<Name>.golden.json.
func Scenarios() []Scenario {
	var all []Scenario
	all = append(all, fairScenarios()[:3]...) // rotation, lexicographic, crowding
	all = append(all, queueScenarios()...)
	all = append(all, receiverScenarios()...)
	all = append(all, atomicScenarios()...)
	all = append(all, crashScenarios()...)
	all = append(all, concurrentScenarios()...)
	all = append(all, fairScenarios()[3:]...) // starvation bound
	all = append(all, policyScenarios()...)   // docs/contract.md §7.1–§7.3 and bulk redrive
	all = append(all, rotationScenarios()...) // docs/contract.md §7.6
	all = append(all, failureScenarios()...)  // docs/contract.md §7.8
	all = append(all, lifeScenarios()...)     // docs/contract.md §7.9
	all = append(all, destScenarios()...)     // docs/contract.md §7.11
	return all
}
