// The fake provider in a process of its own, for benchmarks that must not count its sockets and memory (or its file
// descriptors) in the process they measure. Started as `node --import tsx serve-openai.ts '<FakeOpenAIOptions JSON>'`;
// prints `{"url": ...}` on one line once it listens, and stops on SIGTERM or when its parent closes stdin.
import { FakeOpenAIServer, type FakeOpenAIOptions } from './openai-server.js';

const options = JSON.parse(process.argv[2] ?? '{}') as FakeOpenAIOptions;
const fake = await FakeOpenAIServer.start({ record: false, ...options });
process.stdout.write(`${JSON.stringify({ url: fake.url, apiKey: fake.apiKey })}\n`);
const stop = () => void fake.stop().finally(() => process.exit(0));
process.once('SIGTERM', stop);
process.stdin.once('end', stop);
process.stdin.resume();
