// The part of autocannon 9's API the webhook benchmark uses (the package ships no types).
declare module 'autocannon' {
  interface RequestContext {
    [key: string]: unknown;
  }
  interface RawRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
  }
  interface RequestSpec extends RawRequest {
    setupRequest?: (request: RawRequest, context: RequestContext) => RawRequest;
    onResponse?: (status: number, body: string, context: RequestContext) => void;
  }
  interface Options {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    requests?: RequestSpec[];
  }
  interface Histogram {
    average: number;
    p50: number;
    p99: number;
    max: number;
  }
  interface Result {
    requests: Histogram & { total: number };
    latency: Histogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
  }
  function autocannon(options: Options): Promise<Result>;
  export default autocannon;
}
