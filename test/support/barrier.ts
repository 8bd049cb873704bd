/** A promise with its resolve exposed: one side waits on `promise`, the other calls `open()`. */
export class Gate {
  readonly promise: Promise<void>;
  private resolveFn!: () => void;
  opened = false;

  constructor() {
    this.promise = new Promise((resolve) => {
      this.resolveFn = resolve;
    });
  }

  open(): void {
    this.opened = true;
    this.resolveFn();
  }
}

/** Resolves for everyone once `parties` callers have arrived. */
export class Barrier {
  private arrived = 0;
  private readonly gate = new Gate();

  constructor(private readonly parties: number) {}

  arrive(): Promise<void> {
    this.arrived++;
    if (this.arrived >= this.parties) this.gate.open();
    return this.gate.promise;
  }
}
