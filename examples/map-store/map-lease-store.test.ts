// Runs leasehold's store contract against MapLeaseStore with Node's test runner:
//   node --test map-lease-store.test.js
import { storeContract } from 'leasehold/testing';
import { MapLeaseBook, MapLeaseStore } from './map-lease-store.js';

const book = new MapLeaseBook();
// Every open() is a new instance over the same data, as a new connection would be.
storeContract({ name: 'map', open: () => new MapLeaseStore(book) });
