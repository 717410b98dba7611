package sim

import (
	"maps"
	"slices"
)

// churn weighs the faults and the tiering more than the default menu:
// leaders lose their disks and are replaced by force, remote storage
// and retention run often.
var churn = map[string]int{"crash": 6, "lose-disk": 4, "force-leader": 4, "restart": 8, "expire": 8,
	"copy": 10, "prune": 6, "elect": 5}

// loneLeaderQuiet leaves out the faults that draw a run's steps away
// from the lone-leader incident and the switch (store, WAL read and
// control-plane faults, partitions, clock jumps, the undo) and the
// operator's start-phase-2 (open findings with unclean elections when
// the rows were searched).
var loneLeaderQuiet = map[string]int{"faults": 0, "wal-read-faults": 0, "plane-faults": 0, "cp-outage": 0,
	"cp-ambiguous": 0, "clock-jump": 0, "partition": 0, "undo-switch": 0, "rearm-switch": 0, "start-phase-2": 0}

// loneLeaderMenu orders github.com/aiven/inkless/pull/857's premise by
// the switch's phase (RunOptions.Weights "action@phase"): in the classic
// phase the lone-leader incident (scenario.go), restarts and the remote
// tasks' two steps; from the armed switch to phase 2 the switch's steps
// weighed up and brokers that are down stay down (restarts at 1, no
// crashes or lost disks), so that a lost leader can miss the seal; in
// phase 2 restarts, forced leaders, copies, retention, the pruner and
// consumers.
var loneLeaderMenu = withWeights(loneLeaderQuiet, map[string]int{"task-lookup": 8, "task-install": 6,
	"lone-leader-lost@classic": 4, "restart@classic": 8, "switch-step@seal-pending": 20, "restart@seal-pending": 1,
	"crash@seal-pending": 0, "arm-crash@seal-pending": 0, "lose-disk@seal-pending": 0, "switch-step@phase-1": 20,
	"restart@phase-1": 1, "crash@phase-1": 0, "arm-crash@phase-1": 0, "lose-disk@phase-1": 0, "restart@phase-2": 10,
	"force-leader@phase-2": 6, "prune@phase-2": 10, "copy@phase-2": 10, "expire@phase-2": 10, "consume@phase-2": 12})

// loneLeaderResealMenu is loneLeaderMenu with the incident and the
// remote tasks weighed up, and the pruner and the operator's lowered
// seal in phase 1.
var loneLeaderResealMenu = withWeights(loneLeaderMenu, map[string]int{"lone-leader-lost@classic": 8,
	"task-lookup": 12, "task-install": 8, "prune@phase-1": 10, "reseal@phase-1": 4})

// loneLeaderSwitchMenu is loneLeaderResealMenu with the switch armed
// sooner.
var loneLeaderSwitchMenu = withWeights(loneLeaderResealMenu, map[string]int{"arm-switch@classic": 3})

// loneLeaderMoveMenu is loneLeaderMenu with log directory moves across
// the seal: moves started and copied in the classic phase and while the
// seal is pending (elections weighed up and followers' fetches down
// there, so that a replica's tail past the seal stays in its future log
// untruncated), no move fetcher copies in phase 1 (a copy truncates a
// future log past the log end), and in phase 2 consolidation,
// promotions and small produces weighed up, the move fetcher's copies
// down, and brokers left running (no stops, crashes or lost disks,
// restarts at 1: a restarted move validates the future log first).
var loneLeaderMoveMenu = withWeights(loneLeaderMenu, map[string]int{"start-move@classic": 8,
	"move-copy@classic": 6, "replicate@classic": 8, "arm-switch@classic": 3, "start-move@seal-pending": 8,
	"move-copy@seal-pending": 12, "elect@seal-pending": 10, "replicate@seal-pending": 3,
	"shrink-isr@seal-pending": 4, "stop@seal-pending": 0, "move-copy@phase-1": 0, "stop@phase-1": 0,
	"restart@phase-2": 1, "stop@phase-2": 0, "crash@phase-2": 0, "arm-crash@phase-2": 0, "lose-disk@phase-2": 0,
	"move-copy@phase-2": 3, "promote-future@phase-2": 12, "consolidate@phase-2": 12, "produce@phase-2": 6})

// truncateFullyMenu is uncleanQuiet with DeleteRecords, retention, crashes
// (whole and cut at a file operation), clean stops and restarts weighed
// up: followers whose log start DeleteRecords raised meet unclean leaders
// with lower log ends, and crash between a reset and their directory's
// next fsync.
var truncateFullyMenu = withWeights(uncleanQuiet, map[string]int{"delete-records": 6, "expire": 6,
	"arm-crash": 6, "crash": 4, "stop": 3, "restart": 8})

// latePutsMenu takes late PUTs (weight 0 in the default menu:
// random.go) with store faults and copies weighed up, so that a copy's
// data PUT fails while its indexes PUT is in flight.
var latePutsMenu = map[string]int{"late-puts": 3, "faults": 4, "copy": 12}

// stepFaultMenu takes the control plane's failing commit steps (weight
// 0 in the default menu: random.go).
var stepFaultMenu = map[string]int{"cp-step-fault": 3}

// startPhaseTwoMenu weighs up the operator's start-phase-2 (which
// random runs take in phase 1 only) and the crashes and restarts that
// leave replicas with tails of older epochs below the seal.
var startPhaseTwoMenu = map[string]int{"start-phase-2": 4, "crash": 8, "restart": 8}

// deleteRecordsMenu takes the admin's DeleteRecords (weight 0 in the
// default menu: random.go).
var deleteRecordsMenu = map[string]int{"delete-records": 2}

// emptyPrefixMenu weighs up DeleteRecords (to the seal), the switch
// and the operator's start-phase-2, which together empty the classic
// prefix before phase 2.
var emptyPrefixMenu = map[string]int{"delete-records": 10, "start-phase-2": 6, "arm-switch": 4, "switch-step": 10}

// producerRebuildMenu is idempotent produce, tiering and lagging
// followers alone: retries weighed down, so a lost answer stays
// unanswered across a rebuild from remote storage and an election, and
// the faults, the switch, moves and consolidation left out.
var producerRebuildMenu = map[string]int{"produce-idempotent": 20, "retry-produce": 1, "produce": 5, "replicate": 15,
	"shrink-isr": 4, "copy": 10, "expire": 10, "stop": 3, "restart": 6, "elect": 4, "crash": 0, "lose-disk": 2,
	"arm-switch": 0, "switch-step": 0, "start-move": 0, "move-copy": 0, "promote-future": 0, "faults": 0,
	"wal-read-faults": 0, "plane-faults": 0, "consolidate": 0, "task-lookup": 0, "task-install": 0, "cp-outage": 0,
	"cp-ambiguous": 0, "partition": 0, "clock-jump": 0, "settle": 0, "arm-crash": 0, "delete-records": 0}

// moveMenu is log directory moves with elections, stops and restarts:
// promotions weighed up, the move fetcher's copies down, and tiering,
// idempotent producers, the switch and the faults left out.
var moveMenu = map[string]int{"produce": 10, "replicate": 15, "elect": 6, "elect-preferred": 3, "stop": 4, "restart": 8,
	"start-move": 4, "move-copy": 2, "promote-future": 8, "produce-idempotent": 0, "retry-produce": 0, "consolidate": 0,
	"copy": 0, "expire": 0, "prune": 0, "shrink-isr": 0, "crash": 0, "arm-crash": 0, "delete-records": 0, "lose-disk": 0,
	"faults": 0, "wal-read-faults": 0, "plane-faults": 0, "settle": 0, "arm-switch": 0, "task-lookup": 0,
	"task-install": 0, "cp-outage": 0, "cp-ambiguous": 0, "partition": 0, "clock-jump": 0}

// uncleanQuiet is the unclean menu without the actions that break it
// first with every guard on (idempotent producers, elect-replica,
// start-phase-2, reseal: open findings when the rows were searched) or draw its steps away (the
// faults, moves, the undo, DeleteRecords).
var uncleanQuiet = map[string]int{"elect-unclean": 3, "produce-idempotent": 0, "retry-produce": 0, "start-move": 0,
	"move-copy": 0, "promote-future": 0, "faults": 0, "wal-read-faults": 0, "plane-faults": 0, "cp-outage": 0,
	"cp-ambiguous": 0, "partition": 0, "clock-jump": 0, "arm-crash": 0, "delete-records": 0, "settle": 0,
	"elect-replica": 0, "reseal": 0, "undo-switch": 0, "rearm-switch": 0, "start-phase-2": 0}

// uncleanTieringMenu is uncleanQuiet with tiering, retention, the
// pruner, crashes and the switch weighed up.
var uncleanTieringMenu = withWeights(uncleanQuiet, map[string]int{"copy": 10, "expire": 8, "prune": 6, "crash": 3,
	"restart": 6, "arm-switch": 3, "switch-step": 8, "task-lookup": 0, "task-install": 0})

// uncleanTaskMenu is uncleanQuiet with the remote tasks' two steps and
// copies weighed up.
var uncleanTaskMenu = withWeights(uncleanQuiet, map[string]int{"task-lookup": 8, "task-install": 6, "copy": 10,
	"crash": 3})

// withWeights is base with w's weights.
func withWeights(base, w map[string]int) map[string]int {
	m := maps.Clone(base)
	if m == nil && len(w) > 0 {
		m = make(map[string]int, len(w))
	}
	maps.Copy(m, w)
	return m
}

// allClearMenu takes the incident's end, all-clear (weight 0 in the
// default menu: random.go).
var allClearMenu = map[string]int{"all-clear": 1}

// uncleanAllClearMenu is uncleanMenu with all-clear.
var uncleanAllClearMenu = map[string]int{"elect-unclean": 1, "start-phase-2": 0, "all-clear": 1}

// uncleanExpireMenu is uncleanAllClearMenu with unclean elections at 2
// and tiering and retention weighed up.
var uncleanExpireMenu = map[string]int{"elect-unclean": 2, "start-phase-2": 0, "all-clear": 1, "expire": 6, "copy": 8}

// flushMenu takes the flush.messages changes (weight 0 in the default
// menu: random.go).
var flushMenu = map[string]int{"flush": 2}

// producerLogStartMenu weighs idempotent producers, DeleteRecords and
// restarts up: producers whose batches all lie below the log start.
var producerLogStartMenu = map[string]int{"produce-idempotent": 20, "retry-produce": 1, "produce": 5, "replicate": 15,
	"delete-records": 4, "crash": 4, "restart": 6}

// uncleanOperatorMenu is unclean ElectLeaders requests (weight 0 in the
// default menu) with the operator's recovery commands at their default
// weights.
var uncleanOperatorMenu = map[string]int{"elect-unclean": 1}

// uncleanMenu takes unclean ElectLeaders requests and leaves out the
// operator's start-phase-2 (see simCatches).
var uncleanMenu = map[string]int{"elect-unclean": 1, "start-phase-2": 0}

// unclean3Menu is uncleanMenu with unclean elections weighed up to 3.
var unclean3Menu = map[string]int{"elect-unclean": 3, "start-phase-2": 0}

// recreateMenu takes the topic's deletion and recreation (weight 0 in
// the default menu: random.go; simCatches takes it), with high-watermark checkpoints, crashes
// and restarts weighed up and the switch off (recreate-topic applies only
// in the classic phase).
var recreateMenu = map[string]int{"recreate-topic": 3, "checkpoint-hw": 4, "crash": 6, "restart": 8, "arm-switch": 0}

// menus are the menus above by the names docs/simulation.md gives them
// (tierlog-sim's -menu). "default" is the scheduler's own (random.go).
var menus = map[string]map[string]int{
	"default":              nil,
	"churn":                churn,
	"all-clear":            allClearMenu,
	"lone-leader":          loneLeaderMenu,
	"lone-leader-reseal":   loneLeaderResealMenu,
	"lone-leader-switch":   loneLeaderSwitchMenu,
	"move-across-the-seal": loneLeaderMoveMenu,
	"truncate-fully":       truncateFullyMenu,
	"late-puts":            latePutsMenu,
	"cp-step-fault":        stepFaultMenu,
	"start-phase-2":        startPhaseTwoMenu,
	"delete-records":       deleteRecordsMenu,
	"phase-2":              emptyPrefixMenu,
	"producer":             producerRebuildMenu,
	"producer-log-start":   producerLogStartMenu,
	"move":                 moveMenu,
	"unclean":              uncleanMenu,
	"unclean-3":            unclean3Menu,
	"unclean-all-clear":    uncleanAllClearMenu,
	"unclean-expire":       uncleanExpireMenu,
	"unclean-operator":     uncleanOperatorMenu,
	"unclean-task":         uncleanTaskMenu,
	"unclean-tiering":      uncleanTieringMenu,
	"flush":                flushMenu,
	"recreate":             recreateMenu,
}

// Menu returns a copy of the menu named name (nil for "default"), for
// RunOptions.Weights; ok is false for an unknown name.
func Menu(name string) (weights map[string]int, ok bool) {
	m, ok := menus[name]
	return maps.Clone(m), ok
}

// MenuNames returns the names Menu knows, sorted.
func MenuNames() []string { return slices.Sorted(maps.Keys(menus)) }

// WithWeights returns menu with the weights w put over it (a copy):
// tierlog-sim's -weights on top of its -menu.
func WithWeights(menu, w map[string]int) map[string]int { return withWeights(menu, w) }
