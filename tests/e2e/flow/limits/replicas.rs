//! Two replicas on one PostgreSQL database sharing one Redis prefix (skipped, loudly, when either
//! server is unreachable, unless `CI` is set): a project's and a key's rpm, a daily budget, and a
//! limit change reaching both replicas within the contract's second, watched under load. And the
//! test Redis itself.

use super::*;

// ------------------------------------------------------------------ TestRedis itself

#[test]
fn test_redis_gives_each_test_a_prefix_and_deletes_its_keys_on_drop() {
    let Some(first) = TestRedis::create() else {
        return;
    };
    let Some(second) = TestRedis::create() else {
        return;
    };
    assert_ne!(first.prefix(), second.prefix());
    assert!(first.prefix().starts_with("gwtest:"), "{}", first.prefix());
    for i in 0..3 {
        let key = format!("{}k{i}", first.prefix());
        first.command(&["SET", &key, "1"]);
    }
    let other = format!("{}k", second.prefix());
    second.command(&["SET", &other, "1"]);
    assert_eq!(first.keys().len(), 3, "{:?}", first.keys());
    let url = first.url().to_owned();
    let prefix = first.prefix().to_owned();
    drop(first);
    // Another handle on the same server sees that only the dropped prefix was emptied.
    assert_eq!(
        second.command(&["EXISTS", &format!("{prefix}k0")]),
        gateway_test_support::redis::Reply::Integer(0),
        "keys under {prefix} on {url} survived the drop"
    );
    assert_eq!(second.keys(), vec![other]);
}

// ------------------------------------------------------------------ two replicas, one Redis

#[test]
fn a_project_rpm_is_shared_by_two_replicas_through_redis() {
    let Some((_db, redis, a, b)) = two_replicas(None) else {
        return;
    };
    set_limits(&a, &["project", "limit", &a.project_id, "--rpm", "10"]);
    let body = hello(&a.project_id, "hi");
    let started = Instant::now();
    let responses: Vec<(usize, Response)> = (0..30)
        .map(|i| (i % 2, post([&a, &b][i % 2], &a.key, &body)))
        .collect();
    let elapsed = started.elapsed();

    let passed: Vec<usize> = (0..30).filter(|&i| responses[i].1.status == 200).collect();
    println!(
        "rpm 10 over two replicas: {} of 30 passed in {elapsed:?}: {passed:?}",
        passed.len()
    );
    let most = admissible(10, Duration::from_secs(6), elapsed);
    assert!(
        (10..=most).contains(&passed.len()),
        "{} of 30 requests passed a shared rpm of 10 (expected 10{})",
        passed.len(),
        if most > 10 {
            format!(" to {most}")
        } else {
            String::new()
        }
    );
    // A full bucket admits the burst first: the first ten, from both replicas alike.
    assert_eq!(passed[..10], (0..10).collect::<Vec<_>>());
    let mut refused_by = [0, 0];
    for (replica, response) in &responses {
        if response.status == 200 {
            assert_ok(response);
            continue;
        }
        let id = assert_limited(
            response,
            "project rate limit of 10 requests per minute reached",
            60,
        );
        let gw = [&a, &b][*replica];
        assert_rate_limited_record(gw, &a.key, &id);
        refused_by[*replica] += 1;
    }
    assert!(
        refused_by.iter().all(|&n| n > 0),
        "both replicas should refuse: {refused_by:?}"
    );
    assert!(
        !redis.keys().is_empty(),
        "nothing was counted in Redis under {}",
        redis.prefix()
    );
}

#[test]
fn a_keys_rpm_is_shared_by_two_replicas_and_other_keys_are_unaffected() {
    let Some((_db, _redis, a, b)) = two_replicas(None) else {
        return;
    };
    let limited = a
        .cli(&["key", "create", &a.project_id, "--rpm", "5"])
        .checked("key create --rpm 5")
        .last_line();
    std::thread::sleep(APPLIED);
    let body = hello(&a.project_id, "hi");
    let started = Instant::now();
    let responses: Vec<(usize, Response)> = (0..20)
        .map(|i| (i % 2, post([&a, &b][i % 2], &limited, &body)))
        .collect();
    let elapsed = started.elapsed();
    let passed = responses.iter().filter(|(_, r)| r.status == 200).count();
    println!("key rpm 5 over two replicas: {passed} of 20 passed in {elapsed:?}");
    let most = admissible(5, Duration::from_secs(12), elapsed);
    assert!(
        (5..=most).contains(&passed),
        "{passed} of 20 requests passed a key rpm of 5"
    );
    for (replica, response) in &responses {
        if response.status != 200 {
            let id = assert_limited(
                response,
                "key rate limit of 5 requests per minute reached",
                60,
            );
            assert_rate_limited_record([&a, &b][*replica], &a.key, &id);
        }
    }
    // The project's other key has no limit of its own and the project none at all.
    for gw in [&a, &b, &a, &b, &a, &b] {
        let response = post(gw, &a.key, &body);
        assert_ok(&response);
        assert_no_headers(&response.headers, &REQUEST_HEADERS, "without a limit");
    }
}

#[test]
fn a_daily_budget_shared_by_two_replicas_stops_requests_once_spent() {
    // One word in, one word out at $1500 per million tokens each way: $0.003 a request, so
    // a $0.01 budget is reached by the fourth request (spent $0.012, over by less than one).
    let Some((_db, _redis, a, b)) = two_replicas(Some((1500.0, 1500.0))) else {
        return;
    };
    let budget = 0.01;
    let body = hello(&a.project_id, "hi");
    let first = assert_ok(&post(&a, &a.key, &body));
    let id = first["invocationId"].as_str().expect("invocationId");
    let cost = record_via_api(&a, &a.key, id)["usageCost"]
        .as_f64()
        .expect("a priced route records usageCost");
    assert!((cost - 0.003).abs() < 1e-9, "one request costs {cost}");

    set_limits(
        &a,
        &[
            "project",
            "limit",
            &a.project_id,
            "--daily-budget-usd",
            "0.01",
        ],
    );
    let mut spent = cost;
    let mut refused = Vec::new();
    for i in 0..12 {
        let gw = [&b, &a][i % 2];
        let response = post(gw, &a.key, &body);
        if response.status == 200 {
            assert!(
                refused.is_empty(),
                "request {i} passed after a refusal: the budget cannot have grown"
            );
            let answer = assert_ok(&response);
            let id = answer["invocationId"].as_str().expect("invocationId");
            spent += record_via_api(gw, &a.key, id)["usageCost"]
                .as_f64()
                .expect("usageCost");
        } else {
            let id = assert_limited(&response, "project daily budget of $0.01 reached", 86_400);
            assert_rate_limited_record(gw, &a.key, &id);
            refused.push(i);
        }
    }
    println!("spent ${spent:.4} of a ${budget} daily budget; refused: {refused:?}");
    assert!(!refused.is_empty(), "the budget never stopped a request");
    assert!(
        spent >= budget - 1e-9,
        "refused with ${spent} spent of ${budget}"
    );
    assert!(
        spent < budget + cost + 1e-9,
        "sequential requests overspent the ${budget} budget: ${spent} (one costs ${cost})"
    );
}
// ------------------------------------------------------------------ leases

/// `limit_leases`: two replicas that admit from blocks of 1% of each limit admit no more than
/// the limit in total, and refuse no earlier than the other replica's block allows; a budget
/// stops them once spent, as without leases but for that block.
#[test]
fn leased_replicas_never_admit_beyond_a_shared_limit() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let Some(redis) = TestRedis::create() else {
        return;
    };
    let price = Some((1500.0, 1500.0));
    let a = replica_with(&db, &redis, price, &["limit_leases = true"]);
    let b = replica_with(&db, &redis, price, &["limit_leases = true"]);
    set_limits(&a, &["project", "limit", &a.project_id, "--rpm", "300"]);
    let body = hello(&a.project_id, "hi");
    let started = Instant::now();
    let responses: Vec<Response> = (0..360)
        .map(|i| post([&a, &b][i % 2], &a.key, &body))
        .collect();
    let elapsed = started.elapsed();
    let passed = responses.iter().filter(|r| r.status == 200).count();
    println!("rpm 300 over two leased replicas: {passed} of 360 passed in {elapsed:?}");
    // The other replica's block: 3 requests it took and did not use.
    let most = admissible(300, Duration::from_millis(200), elapsed);
    assert!(
        (297..=most).contains(&passed),
        "{passed} of 360 requests passed a shared rpm of 300 with leases (297 to {most})"
    );
    let refused = responses
        .iter()
        .find(|r| r.status != 200)
        .expect("the limit refused some");
    assert_limited(
        refused,
        "project rate limit of 300 requests per minute reached",
        60,
    );

    // A budget: $0.003 a request against a new key's $0.01 (the project's rate limit lifted).
    set_limits(&a, &["project", "limit", &a.project_id, "--rpm", "0"]);
    let budgeted = a
        .cli(&["key", "create", &a.project_id, "--daily-budget-usd", "0.01"])
        .checked("key create --daily-budget-usd 0.01")
        .last_line();
    std::thread::sleep(APPLIED);
    let (budget, cost) = (0.01, 0.003);
    let mut spent = 0.0;
    let mut refused = 0;
    for i in 0..12 {
        let gw = [&b, &a][i % 2];
        let response = post(gw, &budgeted, &body);
        if response.status == 200 {
            assert_eq!(refused, 0, "request {i} passed after a refusal");
            spent += cost;
        } else {
            assert_limited(&response, "key daily budget of $0.01 reached", 86_400);
            refused += 1;
        }
    }
    println!("spent ${spent:.4} of a ${budget} daily budget with leases; {refused} refused");
    assert!(refused > 0, "the budget never stopped a request");
    // Leases hold back at most 1% of the budget each.
    assert!(spent >= budget * 0.99 - 1e-9, "refused with ${spent} spent");
    assert!(spent < budget + cost + 1e-9, "overspent: ${spent}");
}

#[test]
fn a_limit_change_reaches_both_replicas_within_1s() {
    let Some((_db, _redis, a, b)) = two_replicas(None) else {
        return;
    };
    set_limits(&a, &["project", "limit", &a.project_id, "--rpm", "1000"]);
    let load = Load::start([&a, &b], &a.key, hello(&a.project_id, "hi"));
    load.wait_for("both replicas serving under rpm 1000", |events| {
        (0..2).all(|r| {
            events
                .iter()
                .any(|e| e.replica == r && e.status == 200 && e.limit.as_deref() == Some("1000"))
        })
    });
    assert!(
        load.events().iter().all(|e| e.status == 200),
        "refusals under rpm 1000: {:?}",
        load.events().iter().find(|e| e.status != 200)
    );

    // From the moment the change is committed (the CLI has returned).
    b.cli(&["project", "limit", &a.project_id, "--rpm", "1"])
        .checked("project limit --rpm 1");
    let limited_at = Instant::now();
    let refused = load.first_after(limited_at, |e| e.status == 429);
    b.cli(&["project", "limit", &a.project_id, "--rpm", "0"])
        .checked("project limit --rpm 0");
    let cleared_at = Instant::now();
    let served = load.first_after(cleared_at, |e| e.status == 200 && e.limit.is_none());
    let events = load.stop();
    println!(
        "rpm 1 refused after: A {:?}, B {:?}; rpm 0 served again after: A {:?}, B {:?} \
         ({} requests)",
        refused[0],
        refused[1],
        served[0],
        served[1],
        events.len()
    );
    for (what, times) in [("rpm 1 refused", refused), ("rpm 0 served", served)] {
        for (name, after) in ["A", "B"].into_iter().zip(times) {
            let after = after.unwrap_or_else(|| {
                panic!("{what}: replica {name} did not change within {GIVE_UP:?}")
            });
            assert!(
                after < PROPAGATION,
                "{what}: replica {name} changed only after {after:?}"
            );
        }
    }
    // Once cleared, no limit applies: the last answers carry no rate-limit headers.
    let last = events.last().expect("events");
    assert_eq!(last.status, 200);
    assert_eq!(last.limit, None, "a cleared limit still reported");
}

// ------------------------------------------------------------------ load for the propagation test

/// One answer the load saw.
#[derive(Debug, Clone)]
struct Event {
    at: Instant,
    replica: usize,
    status: u16,
    /// `x-ratelimit-limit-requests`, when present.
    limit: Option<String>,
}

/// One client thread sending to two replicas in turn until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    events: Arc<Mutex<Vec<Event>>>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    fn start(replicas: [&Gateway; 2], key: &str, body: Value) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(Mutex::new(Vec::new()));
        let addrs = [replicas[0].addr, replicas[1].addr];
        let key = key.to_owned();
        let body = body.to_string();
        let thread = {
            let stop = stop.clone();
            let events = events.clone();
            std::thread::spawn(move || {
                let mut turn = 0;
                while !stop.load(Ordering::SeqCst) {
                    let replica = turn % 2;
                    turn += 1;
                    let response = gateway_test_support::client::request(
                        addrs[replica],
                        "POST",
                        "/completions",
                        &[
                            ("Content-Type", "application/json"),
                            ("Authorization", key.as_str()),
                        ],
                        body.as_bytes(),
                    );
                    let event = Event {
                        at: Instant::now(),
                        replica,
                        status: response.status,
                        limit: response
                            .header("x-ratelimit-limit-requests")
                            .map(str::to_owned),
                    };
                    events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
                }
            })
        };
        Load {
            stop,
            events,
            thread: Some(thread),
        }
    }

    fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits (up to [`GIVE_UP`]) until `condition` holds of the events so far.
    fn wait_for(&self, what: &str, condition: impl Fn(&[Event]) -> bool) {
        let deadline = Instant::now() + GIVE_UP;
        while !condition(&self.events()) {
            assert!(Instant::now() < deadline, "gave up waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// For each replica, how long after `since` it first answered as `wanted` (answered, not
    /// sent: a request sent before `since` may show the change too, which is fine); `None` when
    /// it did not within [`GIVE_UP`].
    fn first_after(
        &self,
        since: Instant,
        wanted: impl Fn(&Event) -> bool,
    ) -> [Option<Duration>; 2] {
        let deadline = since + GIVE_UP;
        loop {
            let events = self.events();
            let found = [0, 1].map(|replica| {
                events
                    .iter()
                    .find(|e| e.replica == replica && e.at >= since && wanted(e))
                    .map(|e| e.at - since)
            });
            if found.iter().all(Option::is_some) || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stop(mut self) -> Vec<Event> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the load thread");
        }
        self.events()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
