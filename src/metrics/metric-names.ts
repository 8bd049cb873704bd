/**
 * The client-side metrics, shared by the Prometheus collector (`leasehold/metrics`) and the
 * OpenTelemetry instruments (`leasehold/otel`) so both report the same things under names
 * that map onto each other: the OpenTelemetry name with dots turned into underscores, plus
 * `_seconds` for durations and `_total` for counters, is the Prometheus name.
 *
 * Label values are the same lowercase strings as results and events. Keys, owners, lease ids
 * and tokens are never labels.
 */
export const LEASE_METRICS = Object.freeze({
  acquisitions: {
    prometheus: 'leasehold_client_acquisitions_total',
    otel: 'leasehold.client.acquisitions',
    help: 'Acquisitions answered, by result (acquired, busy, unavailable).',
  },
  acquireWait: {
    prometheus: 'leasehold_client_acquire_wait_seconds',
    otel: 'leasehold.client.acquire.wait',
    help: 'Time from the start of an acquisition to its answer, waiting included, by result (acquired, busy).',
  },
  held: {
    prometheus: 'leasehold_client_lease_held_seconds',
    otel: 'leasehold.client.lease.held',
    help: 'How long leases were held, by how they ended (released, lost, expired, clock, closed).',
  },
  renewals: {
    prometheus: 'leasehold_client_renewals_total',
    otel: 'leasehold.client.renewals',
    help: 'Renewals answered, by result (renewed, unavailable, lost).',
  },
  renewalLatency: {
    prometheus: 'leasehold_client_renewal_latency_seconds',
    otel: 'leasehold.client.renewal.latency',
    help: 'Round trip of successful renewals.',
  },
  renewalSlack: {
    prometheus: 'leasehold_client_renewal_slack_seconds',
    otel: 'leasehold.client.renewal.slack',
    help: "Local validity left on a lease when a renewal's answer arrived: near 0 means leases nearly expire between renewals.",
  },
  losses: {
    prometheus: 'leasehold_client_leases_lost_total',
    otel: 'leasehold.client.leases.lost',
    help: 'Leases that ended without being released, by reason (lost, expired, clock, closed).',
  },
  releases: {
    prometheus: 'leasehold_client_releases_total',
    otel: 'leasehold.client.releases',
    help: 'Releases answered, by result (released, not_owner, unavailable).',
  },
  leasesHeld: {
    prometheus: 'leasehold_client_leases_held',
    otel: 'leasehold.client.leases.held',
    help: 'Leases the attached clients hold right now.',
  },
  fenceDecisions: {
    prometheus: 'leasehold_client_fence_decisions_total',
    otel: 'leasehold.client.fence.decisions',
    help: 'Fenced writes decided, by result (applied, duplicate, stale_fence).',
  },
  fencedWrite: {
    prometheus: 'leasehold_client_fenced_write_seconds',
    otel: 'leasehold.client.fenced_write.duration',
    help: 'Duration of fenced writes through a wrapped fence, by result (applied, duplicate, stale_fence, error).',
  },
  leader: {
    prometheus: 'leasehold_client_leader',
    otel: 'leasehold.client.leader',
    help: '1 while this process leads the election, 0 otherwise.',
  },
  leaderChanges: {
    prometheus: 'leasehold_client_leader_changes_total',
    otel: 'leasehold.client.leader.changes',
    help: 'Times this process became leader or stepped down, by change (elected, stepped_down).',
  },
});

/** Histogram buckets in seconds. */
export const BUCKETS = Object.freeze({
  wait: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300],
  held: [0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 86400],
  latency: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
  slack: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
});
