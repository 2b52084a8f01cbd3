//! A fleet whose replicas come and go (Step 10): autoscaling never serves
//! from a replica before it is ready, bounds min = max are a static fleet,
//! failures lose or retry exactly the requests on the failed replica, and
//! the fleet's bill follows its replicas.

use crate::common::{run, setup};
use servesim::metrics::{RejectReason, Status};

/// Llama-3.1-8B on H100s, chat lengths, a rate that swings from 4 to 36
/// req/s over a 30-minute "day".
const DAY: &str = r#"
name = "fleet-day"
seed = 5
duration_s = 1800
warmup_s = 0

[model]
name = "llama-3.1-8b"

[hardware]
gpu = "h100-sxm"
replicas = 1
router = "least-tokens"

[workload]
arrival = "poisson"
rate = 20.0
diurnal = { amplitude = 16.0, period_s = 1800, phase_s = 0 }
prompt_tokens = { dist = "lognormal", mean = 800, cv = 1.0 }
output_tokens = { dist = "lognormal", mean = 200, cv = 0.8 }

[slo]
ttft_ms = 500
tpot_ms = 50

[fleet]
policy = "queue"
target = 24
min_replicas = 1
max_replicas = 4
interval_s = 10
scale_down_delay_s = 60
provision_s = 20
engine_start_s = 10
"#;

/// Every request starts on its replica while that replica serves (after it
/// became ready), having been admitted before it stopped taking requests.
fn assert_served_only_when_ready(rep: &servesim::Report) {
    let f = rep.output.fleet.as_ref().expect("a fleet ran");
    let mut served = 0;
    for (id, r) in rep.output.records.iter().enumerate() {
        if r.status != Status::Completed {
            continue;
        }
        let iv = &f.serving[r.replica as usize];
        let ok = iv.iter().any(|&(a, b)| r.admitted < b && r.first_scheduled >= a);
        assert!(ok, "request {id} admitted at {} on replica {} outside its serving time {iv:?}", r.admitted, r.replica);
        served += 1;
    }
    assert!(served > 0);
}

#[test]
fn autoscaling_never_serves_from_a_replica_before_it_is_ready() {
    let rep = run(DAY, &[]);
    let fl = rep.summary.fleet.as_ref().expect("fleet summary");
    assert!(fl.scale_ups > 0 && fl.scale_downs > 0, "{fl:?}");
    assert!(fl.peak_ready_replicas > 1);
    assert_served_only_when_ready(&rep);
    // A replica added later than t = 0 served only after its cold start.
    let f = rep.output.fleet.as_ref().unwrap();
    assert!(
        (f.cold_start_s - (20.0 + 10.0 + rep.setup.pools[0].memory.weights_gib_total * 1.073741824 / 2.0)).abs() < 1e-6
    );
    for iv in &f.serving[1..] {
        for &(a, _) in iv {
            assert!(a >= f.cold_start_s + 10.0 - 1e-9, "ready at {a}, before a tick plus a cold start");
        }
    }
    // Starting replicas ran no steps: every busy second lies in billed
    // time after the cold start (serving, then draining).
    for (i, st) in rep.output.replicas.iter().enumerate() {
        let starting = f.serving[i].len() as f64 * f.cold_start_s * (i > 0) as u8 as f64;
        assert!(
            st.busy <= f.slot_billed_s[i] - starting + 1e-6,
            "replica {i}: busy {} > {}",
            st.busy,
            f.slot_billed_s[i]
        );
    }
    // Billed time covers serving time; the bill is GPU-hours × price.
    assert!(
        f.billed_replica_s
            >= f.serving.iter().flatten().map(|&(a, b)| b.min(rep.output.end_time) - a).sum::<f64>() - 1e-6
    );
    assert!((fl.usd - fl.gpu_hours * rep.setup.pools[0].price_per_gpu_hour).abs() < 1e-9);
    assert!((rep.summary.cost.gpu_hours - fl.gpu_hours).abs() < 1e-12);
    // Every request is accounted for, and the SLO windows add up.
    let n = rep.output.records.len() as u64;
    assert_eq!(fl.slo_over_time.iter().map(|w| w.requests).sum::<u64>(), n);
    assert!(fl.rescued_requests.unwrap() > 0, "frozen at one replica, the peak misses its SLO");
    // The net is the whole run's difference against the frozen fleet, and
    // gains less losses; per window it is signed.
    let (g, l) = (fl.slo_gained_requests.unwrap(), fl.slo_lost_requests.unwrap());
    assert_eq!(fl.rescued_requests.unwrap(), g as i64 - l as i64);
    let met: u64 = fl.slo_over_time.iter().map(|w| w.slo_met).sum();
    let frozen: u64 = fl.slo_over_time.iter().filter_map(|w| w.slo_met_frozen).sum();
    assert_eq!(fl.rescued_requests.unwrap(), met as i64 - frozen as i64);
}

#[test]
fn bounds_min_equal_max_are_a_static_fleet() {
    let fixed = DAY.replace("[fleet]", "[ignored]").split("[ignored]").next().unwrap().to_string();
    for policy in ["queue", "utilisation", "pending-tokens", "ttft"] {
        let p = format!("fleet.policy=\"{policy}\"");
        let target = if policy == "utilisation" { "fleet.target=0.5" } else { "fleet.target=24" };
        let scaled = run(DAY, &[&p, target, "hardware.replicas=2", "fleet.min_replicas=2", "fleet.max_replicas=2"]);
        let stat = run(&fixed, &["hardware.replicas=2"]);
        assert_eq!(scaled.output.records.len(), stat.output.records.len());
        for (a, b) in scaled.output.records.iter().zip(&stat.output.records) {
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{policy}");
        }
        let mut a = serde_json::to_value(&scaled.summary).unwrap();
        let mut b = serde_json::to_value(&stat.summary).unwrap();
        let fl = a.as_object_mut().unwrap().remove("fleet").expect("fleet section");
        assert_eq!(fl["scale_ups"], 0);
        assert!(b.as_object_mut().unwrap().remove("fleet").is_some_and(|f| f.is_null()));
        assert_eq!(a, b, "{policy}: min = max must be the static fleet, summary included");
    }
}

#[test]
fn failures_lose_or_retry_exactly_the_requests_on_the_failed_replica() {
    let fixed = DAY.replace("[fleet]", "[ignored]").split("[ignored]").next().unwrap().to_string();
    let failing = format!("{fixed}\n[fleet]\nfailures = [{{ at_s = 600, replica = 1, repair_s = 120 }}]\n");
    let lost = run(&failing, &["hardware.replicas=3", "fleet.on_failure=\"lost\""]);
    let retry = run(&failing, &["hardware.replicas=3"]);
    let base = run(&fixed, &["hardware.replicas=3"]);
    let fl = lost.summary.fleet.as_ref().unwrap();
    assert_eq!(fl.failures.failures, 1);
    assert!(fl.failures.lost_requests > 0);
    assert_eq!(
        lost.summary.metrics.failures_by_reason.get(RejectReason::ReplicaFailed.as_str()).copied(),
        Some(fl.failures.lost_requests)
    );
    assert!((fl.failures.downtime_replica_s - 120.0).abs() < 1e-9);
    // Up to the failure the three runs are the same run.
    for ((a, b), c) in lost.output.records.iter().zip(&retry.output.records).zip(&base.output.records) {
        if a.arrival < 590.0 && c.last_token < 600.0 {
            assert_eq!(format!("{a:?}"), format!("{c:?}"));
            assert_eq!(format!("{b:?}"), format!("{c:?}"));
        }
    }
    // Retrying loses nothing: every request completes, and those sent again took longer.
    let rf = retry.summary.fleet.as_ref().unwrap();
    assert_eq!(rf.failures.retried_requests, fl.failures.lost_requests);
    assert!(retry.output.records.iter().all(|r| r.status == Status::Completed));
    assert_served_only_when_ready(&retry);
    // The failed replica is billed while under repair (a reserved GPU).
    assert!((lost.summary.cost.gpu_hours - base.summary.cost.gpu_hours).abs() / base.summary.cost.gpu_hours < 0.01);
}

#[test]
fn random_failures_are_deterministic_and_follow_the_mtbf() {
    let fixed = DAY.replace("[fleet]", "[ignored]").split("[ignored]").next().unwrap().to_string();
    let text = format!("{fixed}\n[fleet]\nmtbf_h = 0.1\nrepair_s = 30\n");
    let a = run(&text, &["hardware.replicas=4"]);
    let b = run(&text, &["hardware.replicas=4"]);
    let (fa, fb) = (a.summary.fleet.as_ref().unwrap(), b.summary.fleet.as_ref().unwrap());
    assert_eq!(fa, fb);
    // 4 replicas × 0.5 h at one failure per 0.1 h: 20 expected (less the repair time).
    assert!((8..=35).contains(&fa.failures.failures), "{} failures", fa.failures.failures);
    assert!(a.output.records.iter().all(|r| r.status == Status::Completed));
}

#[test]
fn scale_to_zero_holds_requests_until_a_replica_is_ready() {
    let text = DAY.replace("min_replicas = 1", "min_replicas = 0");
    let s = setup(&text, &["workload.rate=0.5", "workload.diurnal.amplitude=0.4", "fleet.target=2"]);
    let rep = servesim::run_setup(&s, s.scenario.seed);
    let fl = rep.summary.fleet.as_ref().unwrap();
    assert_eq!(fl.min_ready_replicas, 0, "the fleet scaled to zero");
    assert!(rep.output.records.iter().all(|r| r.status == Status::Completed));
    // Some request waited out a cold start.
    let cold = rep.output.fleet.as_ref().unwrap().cold_start_s;
    assert!(rep.output.records.iter().any(|r| r.ttft() > cold * 0.5), "no request waited for a replica");
    assert_served_only_when_ready(&rep);
}

#[test]
fn a_warm_pool_starts_replicas_faster() {
    let cold = run(DAY, &[]);
    let warm = run(DAY, &["fleet.warm_pool=1", "fleet.warm_start_s=2"]);
    let (c, w) = (cold.summary.fleet.as_ref().unwrap(), warm.summary.fleet.as_ref().unwrap());
    assert_eq!(w.warm_pool, 1);
    // The standby is billed throughout.
    assert!(warm.output.fleet.as_ref().unwrap().warm_replica_s >= warm.summary.duration - 1e-6);
    assert!(
        warm.summary.metrics.slo.as_ref().unwrap().attainment
            >= cold.summary.metrics.slo.as_ref().unwrap().attainment - 1e-3,
        "{w:?} {c:?}"
    );
}

#[test]
fn bad_fleet_values_name_the_key() {
    for (set, key) in [
        ("fleet.min_replicas=9", "fleet.min_replicas"),
        ("fleet.target=-1", "fleet.target"),
        ("fleet.policy=\"schedule\"", "fleet.target"),
        ("fleet.failures=[{ at_s = 5, replica = 7 }]", "fleet.failures[0].replica"),
        ("fleet.weight_load_gbps=0", "fleet.weight_load_gbps"),
    ] {
        let err = crate::common::config_error(DAY, &[set]);
        assert!(err.contains(key), "{set}: {err}");
    }
}

#[test]
fn plan_weighs_static_against_scaled_fleets_and_failures() {
    let text = format!("{DAY}\n[plan]\nrate = 20.0\nmax_replicas = 6\n");
    let loaded = servesim::scenario::load_scenario_str(&text, std::path::Path::new("day.toml"), &[]).unwrap();
    let p = servesim::plan::plan(&loaded, &servesim::Catalog::builtin().unwrap()).unwrap();
    let w = p.candidates.first().expect("a winner");
    let n = w.replicas.expect("the day fits some static fleet");
    assert!(n > 1, "the peak needs more than one replica");
    let choices = &p.fleet_choices;
    let stat = choices.iter().find(|c| c.policy == "static").expect("the static fleet is a choice");
    assert!(stat.verdict.meets && stat.max_replicas == n);
    assert!((stat.usd_per_hour - w.usd_per_hour.unwrap()).abs() < 1e-9);
    assert!(choices.iter().any(|c| c.policy == "queue" && c.min_replicas < c.max_replicas));
    // Cheapest meeting first; a meeting choice never follows a failing one.
    let first_fail = choices.iter().position(|c| !c.verdict.meets).unwrap_or(choices.len());
    assert!(choices[first_fail..].iter().all(|c| !c.verdict.meets));
    assert!(choices[..first_fail].windows(2).all(|x| x[0].usd_per_hour <= x[1].usd_per_hour));
    // A scaled fleet pays for fewer replicas than the peak's on average.
    let scaled = choices.iter().find(|c| c.policy == "queue" && c.verdict.meets);
    assert!(scaled.is_none_or(|c| c.mean_billed_replicas < n as f64 + 1.0));
    let h = p.failure_headroom.as_ref().expect("N+1 is planned");
    assert!(h.replicas_needed.is_none_or(|k| k >= n));
    let text = servesim::plan::format_plan(&p, "day", false);
    assert!(text.contains("N+1") && text.contains("fleet choices"), "{text}");
}

#[test]
fn latency_parts_add_up_through_failures_and_scale_to_zero() {
    let fixed = DAY.replace("[fleet]", "[ignored]").split("[ignored]").next().unwrap().to_string();
    let failing = format!("{fixed}\n[fleet]\nfailures = [{{ at_s = 600, replica = 1, repair_s = 120 }}]\n");
    let zero = DAY.replace("min_replicas = 1", "min_replicas = 0");
    for (name, text, sets) in [
        ("failure", failing.as_str(), vec!["hardware.replicas=3"]),
        ("scale to zero", zero.as_str(), vec!["workload.rate=0.5", "workload.diurnal.amplitude=0.4", "fleet.target=2"]),
    ] {
        let mut s = setup(text, &sets);
        s.attribution = true;
        let plain = servesim::run_setup(&setup(text, &sets), s.scenario.seed);
        let rep = servesim::run_setup(&s, s.scenario.seed);
        let p = crate::attribution::check_sums(name, &rep.output.records, &rep.output.parts);
        assert!(p.iter().sum::<f64>() > 0.0);
        for (a, b) in rep.output.records.iter().zip(&plain.output.records) {
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}: attribution changed the run");
        }
    }
}

/// Cases a review found: a retried request timing out in the central queue,
/// a scripted failure of a slot the frozen counterfactual lacks, failures
/// closer together than a step, `plan` with a schedule, LoRA with pools.
#[test]
fn awkward_fleets_run_to_the_end() {
    let fixed = DAY.replace("[fleet]", "[ignored]").split("[ignored]").next().unwrap().to_string();
    let central = format!(
        "{fixed}\n[fleet]\nfailures = [{{ at_s = 600, replica = 0, repair_s = 30 }}, {{ at_s = 600.0001, replica = 1, repair_s = 0 }}, {{ at_s = 600.0002, replica = 1, repair_s = 0 }}]\n"
    );
    for router in ["central-queue", "session-affinity", "power-of-two", "prefix-aware"] {
        let r = format!("hardware.router=\"{router}\"");
        let s = setup(&central, &["hardware.replicas=2", &r, "engine.max_wait_s=2"]);
        let out = servesim::sim::simulate_checked(&s, s.scenario.seed);
        assert!(out.records.iter().all(|r| r.status != Status::InFlight), "{router}");
        assert!(out.fleet.as_ref().unwrap().failures >= 2, "{router}");
    }
    // A scripted failure of slot 3: the frozen fleet (one slot) has no slot 3.
    let rep = run(DAY, &["fleet.failures=[{ at_s = 900, replica = 3, repair_s = 60 }]"]);
    assert!(rep.summary.fleet.as_ref().unwrap().rescued_requests.is_some());
    // plan with a schedule policy.
    let sched = DAY
        .replace("policy = \"queue\"\ntarget = 24\n", "policy = \"schedule\"\n")
        .replace("[fleet]\n", "[fleet]\nschedule = [{ at_s = 0, replicas = 1 }, { at_s = 600, replicas = 3 }]\n");
    let text = format!("{sched}\n[plan]\nrate = 20.0\nmax_replicas = 4\n");
    let loaded = servesim::scenario::load_scenario_str(&text, std::path::Path::new("s.toml"), &[]).unwrap();
    let p = servesim::plan::plan(&loaded, &servesim::Catalog::builtin().unwrap()).unwrap();
    assert!(p.failure_headroom.is_some() && p.fleet_choices.is_empty());
    let pools = "[[pools]]\nname = \"a\"\ngpu = \"h100-sxm\"\ntp = 1\nreplicas = 1\n";
    let text = fixed.replace("[hardware]\ngpu = \"h100-sxm\"\nreplicas = 1\n", "[hardware]\n")
        + pools
        + "\n[lora]\nadapters = 4\n";
    assert!(crate::common::config_error(&text, &[]).contains("lora"));
}

/// Scale-ups follow HPA's default behavior: at most max(4 replicas, 100%)
/// per 15 s, counted from the replicas at the start of the period. From 2
/// replicas a flood of requests asks for 10 at the first look (t = 10 s):
/// it gets 6, and 10 only once that step has left the 15 s period (t = 30 s).
/// A custom `scale_up` rule (one replica per minute) is followed as written.
#[test]
fn scale_ups_follow_the_hpa_rate_limits() {
    let sets = [
        "hardware.replicas=2",
        "fleet.min_replicas=2",
        "fleet.max_replicas=10",
        "fleet.target=4",
        "workload.rate=80",
        "workload.diurnal.amplitude=0",
        "duration_s=120",
    ];
    let size = |rep: &servesim::Report, before: f64| {
        let f = rep.summary.fleet.as_ref().unwrap();
        f.replicas_over_time.iter().filter(|s| s.t < before).map(|s| s.ready + s.starting).max().unwrap()
    };
    let rep = run(DAY, &sets);
    assert_eq!(size(&rep, 25.0), 6, "{:?}", rep.summary.fleet.as_ref().unwrap().replicas_over_time);
    assert_eq!(size(&rep, 120.0), 10);
    let mut slow = sets.to_vec();
    slow.push("fleet.scale_up={policies=[{type=\"pods\",value=1,period_s=60}]}");
    let rep = run(DAY, &slow);
    assert_eq!(size(&rep, 55.0), 3);
    assert_eq!(size(&rep, 120.0), 4);
    // Bad rules name the key.
    let err = crate::common::config_error(DAY, &["fleet.scale_up={policies=[]}"]);
    assert!(err.contains("fleet.scale_up.policies"), "{err}");
    let err = crate::common::config_error(DAY, &["fleet.scale_down={policies=[{type=\"pods\",value=1,period_s=0}]}"]);
    assert!(err.contains("fleet.scale_down.policies[0].period_s"), "{err}");
}

/// A fleet's power per GPU divides by the mean number of billed GPUs, not a
/// rounded one: the day's fleet bills a fractional mean, and the per-GPU power
/// times that mean is the total.
#[test]
fn power_per_gpu_divides_by_the_unrounded_mean_billed_gpus() {
    let rep = run(DAY, &[]);
    let s = &rep.summary;
    let billed = s.fleet.as_ref().unwrap().mean_billed_replicas; // one GPU per replica
    assert!((billed - billed.round()).abs() > 0.01, "the test needs a fractional mean, got {billed}");
    let e = &s.energy;
    let implied = e.mean_power_w / e.mean_power_w_per_gpu;
    assert!((implied - billed).abs() < 1e-9 * billed, "{implied} GPUs vs {billed} billed");
}
