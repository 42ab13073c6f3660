// The control-api's configuration, parsed from the environment once at start. README's table lists every variable.
import { EnvReader, readServiceBasics, type Env, type ServiceBasics } from '../../lib/src/config.js';

export type ControlApiConfig = ServiceBasics;

export function loadControlApiConfig(env: Env = process.env): ControlApiConfig {
  const read = new EnvReader(env);
  const config = readServiceBasics(read, { port: 'CONTROL_PORT', defaultPort: 8080, publicUrl: 'CONTROL_PUBLIC_URL' });
  read.done();
  return config;
}
