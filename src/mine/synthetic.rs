//! A synthetic log corpus with known events, for the variables masking cannot recognise
//! by shape (user and host names, `key=value` values, quoted values, mixed ids) and the
//! words that look like them but name events (`VM Started` / `VM Paused`, `GET` /
//! `POST`). Nothing here is taken from a real data set: the events and the value pools
//! are made up, the value frequencies follow a Zipf law as names in real logs do.

/// Deterministic pseudo-random numbers (a 64-bit LCG), so a seed names a corpus.
pub(crate) struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// An index in `0..n`, Zipf-distributed (exponent 1): a few values are common, most rare.
    pub fn zipf(&mut self, n: usize) -> usize {
        let h: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
        let mut u = (self.next() as f64 / (1u64 << 31) as f64) * h;
        for k in 1..=n {
            u -= 1.0 / k as f64;
            if u <= 0.0 {
                return k - 1;
            }
        }
        n - 1
    }
}

fn name(r: &mut Lcg, min: usize, max: usize) -> String {
    const C: &[u8] = b"bcdfghjklmnprstvz";
    const V: &[u8] = b"aeiou";
    let len = min + r.below(max - min + 1);
    (0..len).map(|i| if i % 2 == 0 { C[r.below(C.len())] } else { V[r.below(V.len())] } as char).collect()
}

/// Lines and, for each, the index of its true event.
pub(crate) fn corpus(seed: u64, lines: usize) -> (Vec<String>, Vec<usize>) {
    let mut r = Lcg(seed);
    let users: Vec<String> = (0..400).map(|_| name(&mut r, 3, 8)).collect();
    let hosts: Vec<String> = (0..120).map(|_| name(&mut r, 4, 9)).collect();
    let files: Vec<String> =
        (0..200).map(|_| format!("{}.{}", name(&mut r, 3, 7), ["txt", "log", "conf"][r.below(3)])).collect();
    let jobs: Vec<String> = (0..300)
        .map(|_| {
            let n = r.next();
            format!("{}{}{}", name(&mut r, 1, 2), n % 97, name(&mut r, 1, 3))
        })
        .collect();
    let vm = ["Started", "Paused", "Resumed", "Stopped"];
    let methods = ["GET", "GET", "GET", "GET", "POST", "POST", "DELETE", "PUT"];
    let mut out = Vec::with_capacity(lines);
    let mut truth = Vec::with_capacity(lines);
    let mut phase = (0usize, 0usize);
    for _ in 0..lines {
        let ip = format!("10.{}.{}.{}", r.below(256), r.below(256), r.below(256));
        let user = &users[r.zipf(users.len())];
        let host = &hosts[r.zipf(hosts.len())];
        let event = r.below(16);
        let line = match event {
            0 => format!("Invalid user {user} from {ip}"),
            1 => format!("Accepted password for {user} from {ip} port {} ssh2", 1024 + r.below(60000)),
            2 => format!("session closed for {user}"),
            3 => format!("connection to {host} established"),
            4 => format!("lookup of {host} failed"),
            5 => format!("request served user={user} status=ok"),
            6 => format!("opened file '{}' for reading", files[r.zipf(files.len())]),
            7 => format!("worker[{}] exited with code {}", r.below(32768), r.below(3)),
            8 => format!("job {} finished", jobs[r.zipf(jobs.len())]),
            9 => format!(
                "backup finished at 2024-05-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                1 + r.below(28),
                r.below(24),
                r.below(60),
                r.below(60),
                r.below(1000)
            ),
            10 => format!("token refreshed for \"{user}\" on {host}"),
            // Events that differ in one word: an instance life cycle (started, then
            // stopped; every third instance paused and resumed in between), HTTP methods
            // (one common, three rare).
            11 | 12 => {
                let (instance, step) = phase;
                let cycle: &[usize] = if instance % 3 == 2 { &[0, 1, 2, 3] } else { &[0, 3] };
                let state = cycle[step];
                phase = if step + 1 == cycle.len() { (instance + 1, 0) } else { (instance, step + 1) };
                out.push(format!(
                    "[instance: {:08x}-aaaa-bbbb-cccc-{:012x}] VM {} (Lifecycle Event)",
                    r.next(),
                    r.next(),
                    vm[state]
                ));
                truth.push(100 + state);
                continue;
            }
            13 => {
                let m = methods[r.below(methods.len())];
                out.push(format!(
                    "{ip} \"{m} /v2/servers/{} HTTP/1.1\" status: 200 len: {}",
                    r.below(999),
                    r.below(5000)
                ));
                truth.push(200 + methods.iter().position(|x| *x == m).unwrap());
                continue;
            }
            14 => format!("cache {} entries evicted", r.below(1000)),
            _ => format!(
                "Dec {:2} {:02}:{:02}:{:02} heartbeat from {host}",
                1 + r.below(28),
                r.below(24),
                r.below(60),
                r.below(60)
            ),
        };
        out.push(line);
        truth.push(event);
    }
    (out, truth)
}

/// Grouping accuracy (Zhu et al. 2019): the share of lines whose predicted group holds
/// exactly the lines of their true event.
pub(crate) fn grouping_accuracy(predicted: &[u64], truth: &[usize]) -> f64 {
    use std::collections::HashMap;
    let mut by_pred: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut by_true: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, (&p, &t)) in predicted.iter().zip(truth).enumerate() {
        by_pred.entry(p).or_default().push(i);
        by_true.entry(t).or_default().push(i);
    }
    let correct = predicted.iter().zip(truth).filter(|(p, t)| by_pred[p] == by_true[t]).count();
    correct as f64 / truth.len() as f64
}
