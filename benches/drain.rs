//! Throughput of the template miner: masking alone, and masking plus Drain, on HDFS-like
//! and mixed lines. `cargo bench --bench drain`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use tayga::mine::{Masker, Miner, MiningConfig};

/// Deterministic pseudo-random numbers, so every run mines the same lines.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn hdfs_lines(n: usize) -> Vec<String> {
    let mut r = Lcg(7);
    (0..n)
        .map(|i| {
            let ip = format!("10.251.{}.{}", r.next() % 256, r.next() % 256);
            let blk = r.next() as i64 * if i % 2 == 0 { 1 } else { -1 } * 1_000_003;
            match i % 6 {
                0 => format!("Receiving block blk_{blk} src: /{ip}:{} dest: /{ip}:50010", r.next() % 60000),
                1 => format!("PacketResponder {} for block blk_{blk} terminating", r.next() % 3),
                2 => format!("Received block blk_{blk} of size {} from /{ip}", r.next() % 67108864),
                3 => format!("BLOCK* NameSystem.addStoredBlock: blockMap updated: {ip}:50010 is added to blk_{blk} size 67108864"),
                4 => format!("Deleting block blk_{blk} file /mnt/hadoop/dfs/data/current/subdir{}/blk_{blk}", r.next() % 64),
                _ => format!("BLOCK* NameSystem.delete: blk_{blk} is added to invalidSet of {ip}:50010"),
            }
        })
        .collect()
}

fn mixed_lines(n: usize) -> Vec<String> {
    let mut r = Lcg(11);
    (0..n)
        .map(|i| match i % 5 {
            0 => format!(
                "connection from 211.167.{}.{} () at Sat Jul  9 12:16:{} 2005",
                r.next() % 256,
                r.next() % 256,
                r.next() % 60
            ),
            1 => format!("session opened for user user{} by (uid={})", r.next() % 40, r.next() % 1000),
            2 => format!(
                "[instance: b9000564-fe1a-409b-b8cc-{:012x}] Took {}.{:02} seconds to build instance.",
                r.next(),
                r.next() % 60,
                r.next() % 100
            ),
            3 => format!(
                "proxy.cse.cuhk.edu.hk:5070 close, {} bytes ({}.{} KB) sent, {} bytes received, lifetime 00:{:02}",
                r.next() % 9999,
                r.next() % 9,
                r.next() % 9,
                r.next() % 999,
                r.next() % 60
            ),
            _ => format!(
                "Times: total = {}, boot = -{}, init = {}, finish = 0",
                r.next() % 99,
                r.next() % 200,
                r.next() % 200
            ),
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let sets = [("hdfs", hdfs_lines(20_000)), ("mixed", mixed_lines(20_000))];
    let mut group = c.benchmark_group("mine");
    for (name, lines) in &sets {
        group.throughput(Throughput::Elements(lines.len() as u64));
        group.bench_with_input(BenchmarkId::new("mask", name), lines, |b, lines| {
            let masker = Masker::default();
            let mut out = String::new();
            b.iter(|| {
                for l in lines {
                    masker.mask_into(l, &mut out);
                    black_box(&out);
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("add", name), lines, |b, lines| {
            b.iter(|| {
                let mut miner = Miner::new(MiningConfig::default()).unwrap();
                for l in lines {
                    black_box(miner.add("svc", l).template_id);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
