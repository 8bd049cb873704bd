/** A one-shot gate: `wait()` resolves after `open()`. For driving interleavings without sleeps. */
export class Gate {
  private opened = false;
  private readonly waiters: Array<() => void> = [];
  readonly reached: Promise<void>;
  private markReached!: () => void;

  constructor() {
    this.reached = new Promise((resolve) => (this.markReached = resolve));
  }

  /** Called by the paused party: signals it has arrived, then waits to be let through. */
  wait(): Promise<void> {
    this.markReached();
    if (this.opened) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  open(): void {
    this.opened = true;
    for (const w of this.waiters.splice(0)) w();
  }
}
