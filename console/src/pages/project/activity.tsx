// Turns and usage: the turn health of the last 24 hours, then what the project spent and how its turns went over a
// chosen period (by model, by purpose, by outcome, latency), then the caps on its usage. Each chart is a small SVG of
// horizontal bars named by a summary of its figures, and the same figures are in a table under it.
import { useId, useState } from 'react';
import { QueryState } from '../../components/query-state.js';
import { USAGE_WINDOWS, useLimits, useObservability, useTurnHealth, useUsage, type ObservabilityReport, type TurnHealth, type UsageReport, type UsageWindow } from './activity-queries.js';

const windowNames: Record<UsageWindow, string> = { '1h': 'the last hour', '24h': 'the last 24 hours', '7d': 'the last 7 days', '30d': 'the last 30 days' };

const count = (value: number) => value.toLocaleString();
const usd = (value: number) => `$${value.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 6 })}`;
const ms = (value: number) => `${value.toLocaleString()} ms`;
const when = (iso: string) => new Date(iso).toLocaleString();

interface Bar {
  label: string;
  value: number;
}

const BAR_HEIGHT = 22;
const ROW_HEIGHT = 30;
const LABEL_WIDTH = 190;
const BAR_SPACE = 300;
const CHART_WIDTH = 600;

/**
 * Horizontal bars as an image named by its figures ("Turns by outcome: failed 1, did not fail 3"), with the same
 * figures in a table under it for anyone who reads rather than looks.
 */
function BarChart({ title, labelHeading, valueHeading, bars, format = count }: { title: string; labelHeading: string; valueHeading: string; bars: Bar[]; format?: (value: number) => string }) {
  const captionId = useId();
  const largest = Math.max(0, ...bars.map((bar) => bar.value));
  const height = bars.length * ROW_HEIGHT + 4;
  const summary = `${title}: ${bars.map((bar) => `${bar.label} ${format(bar.value)}`).join(', ')}`;
  return (
    <figure className="chart" aria-labelledby={captionId}>
      <figcaption id={captionId}>{title}</figcaption>
      <svg role="img" aria-label={summary} viewBox={`0 0 ${CHART_WIDTH} ${height}`} width="100%" height={height} preserveAspectRatio="xMinYMin meet">
        {bars.map((bar, index) => {
          const y = index * ROW_HEIGHT + 2;
          const width = largest === 0 ? 0 : Math.max(bar.value > 0 ? 2 : 0, (bar.value / largest) * BAR_SPACE);
          return (
            <g key={bar.label}>
              <text x={LABEL_WIDTH - 8} y={y + BAR_HEIGHT / 2} textAnchor="end" dominantBaseline="middle" fontSize="13" fill="#1a1a1a">
                {bar.label.length > 26 ? `${bar.label.slice(0, 25)}…` : bar.label}
              </text>
              <rect x={LABEL_WIDTH} y={y} width={width} height={BAR_HEIGHT} fill="#0b5cad" />
              <text x={LABEL_WIDTH + width + 6} y={y + BAR_HEIGHT / 2} dominantBaseline="middle" fontSize="13" fill="#1a1a1a">
                {format(bar.value)}
              </text>
            </g>
          );
        })}
      </svg>
      <details>
        <summary>Figures of “{title}”</summary>
        <table>
          <caption className="visually-hidden">{title}</caption>
          <thead>
            <tr>
              <th scope="col">{labelHeading}</th>
              <th scope="col">{valueHeading}</th>
            </tr>
          </thead>
          <tbody>
            {bars.map((bar) => (
              <tr key={bar.label}>
                <td>{bar.label}</td>
                <td>{format(bar.value)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

function TurnHealthReport({ health }: { health: TurnHealth }) {
  const period = `the last ${health.window_hours} hours`;
  return (
    <>
      <dl className="figures">
        <dt>Turns</dt>
        <dd>{count(health.total)}</dd>
        <dt>Failed</dt>
        <dd>{count(health.errored)}</dd>
        <dt>Failed in a row</dt>
        <dd>{count(health.consecutive_errors)}</dd>
        <dt>Last success</dt>
        <dd>{health.last_success_at ? when(health.last_success_at) : 'none'}</dd>
        <dt>Last error</dt>
        <dd>
          {health.last_error ? (
            <>
              {when(health.last_error.at)}: {health.last_error.message}
              {health.last_error.code ? (
                <>
                  {' '}
                  (<code>{health.last_error.code}</code>)
                </>
              ) : null}{' '}
              <span className="note">
                run <code>{health.last_error.run_id}</code>
              </span>
            </>
          ) : (
            'none'
          )}
        </dd>
      </dl>
      {health.total === 0 ? (
        <p>No turns in {period}.</p>
      ) : (
        <BarChart
          title={`Turns in ${period} by outcome`}
          labelHeading="Outcome"
          valueHeading="Turns"
          bars={[
            { label: 'failed', value: health.errored },
            { label: 'did not fail', value: health.total - health.errored },
          ]}
        />
      )}
    </>
  );
}

function UsageFigures({ usage }: { usage: UsageReport }) {
  const period = windowNames[usage.window];
  if (usage.requests === 0 && usage.model_calls === 0) return <p>No usage in {period}: the project ran no turns and called no model.</p>;
  const priced = usage.by_model.filter((row) => row.cost_usd !== null);
  return (
    <>
      <dl className="figures">
        <dt>Spend</dt>
        <dd>
          {usage.cost_usd === null ? 'unknown: no call had a price' : usd(usage.cost_usd)}
          {usage.unpriced_calls > 0 ? <span className="note"> ({count(usage.unpriced_calls)} calls without a price, not counted)</span> : null}
        </dd>
        <dt>Turns</dt>
        <dd>{count(usage.requests)}</dd>
        <dt>Model calls</dt>
        <dd>{count(usage.model_calls)}</dd>
        <dt>Input tokens</dt>
        <dd>{count(usage.input_tokens)}</dd>
        <dt>Output tokens</dt>
        <dd>{count(usage.output_tokens)}</dd>
      </dl>
      {usage.by_model.length > 0 ? (
        <>
          <BarChart title={`Model calls by model in ${period}`} labelHeading="Model" valueHeading="Model calls" bars={usage.by_model.map((row) => ({ label: row.model, value: row.model_calls }))} />
          <BarChart
            title={`Tokens by model in ${period} (input and output)`}
            labelHeading="Model"
            valueHeading="Tokens"
            bars={usage.by_model.map((row) => ({ label: row.model, value: row.input_tokens + row.output_tokens }))}
          />
          {priced.length > 0 ? (
            <BarChart title={`Spend by model in ${period}`} labelHeading="Model" valueHeading="Spend (USD)" format={usd} bars={priced.map((row) => ({ label: row.model, value: row.cost_usd! }))} />
          ) : (
            <p className="note">No model has a price, so there is no spend to chart: register the provider again with prices to count it.</p>
          )}
        </>
      ) : null}
      {usage.by_purpose.length > 0 ? (
        <BarChart title={`Model calls by purpose in ${period}`} labelHeading="Purpose" valueHeading="Model calls" bars={usage.by_purpose.map((row) => ({ label: row.purpose, value: row.model_calls }))} />
      ) : null}
      {usage.by_model.length > 0 ? (
        <table>
          <caption>By model</caption>
          <thead>
            <tr>
              <th scope="col">Model</th>
              <th scope="col">Model calls</th>
              <th scope="col">Input tokens</th>
              <th scope="col">Output tokens</th>
              <th scope="col">Spend</th>
            </tr>
          </thead>
          <tbody>
            {usage.by_model.map((row) => (
              <tr key={row.model}>
                <td>{row.model}</td>
                <td>{count(row.model_calls)}</td>
                <td>{count(row.input_tokens)}</td>
                <td>{count(row.output_tokens)}</td>
                <td>{row.cost_usd === null ? 'no price' : usd(row.cost_usd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </>
  );
}

function ObservabilityFigures({ report }: { report: ObservabilityReport }) {
  const period = windowNames[report.window];
  if (report.requests === 0) return <p>No turns in {period}.</p>;
  const latency = (['p50', 'p95', 'p99', 'max'] as const).flatMap((name) => (report.latency_ms[name] === null ? [] : [{ label: name, value: report.latency_ms[name]! }]));
  return (
    <>
      <dl className="figures">
        <dt>Turns</dt>
        <dd>{count(report.requests)}</dd>
        <dt>Failed</dt>
        <dd>{count(report.errors)}</dd>
        <dt>Error rate</dt>
        <dd>{report.error_rate === null ? 'none' : `${(report.error_rate * 100).toLocaleString(undefined, { maximumFractionDigits: 1 })}%`}</dd>
      </dl>
      <BarChart
        title={`Turns by status in ${period}`}
        labelHeading="Status"
        valueHeading="Turns"
        bars={Object.entries(report.by_status)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([status, turns]) => ({ label: status, value: turns }))}
      />
      {latency.length > 0 ? (
        <BarChart title={`Turn latency in ${period} (percentiles of turns that ended)`} labelHeading="Percentile" valueHeading="Latency" format={ms} bars={latency} />
      ) : (
        <p>No turn has ended in {period}, so there is no latency yet.</p>
      )}
      {report.top_errors.length > 0 ? (
        <table>
          <caption>Most frequent errors</caption>
          <thead>
            <tr>
              <th scope="col">Code</th>
              <th scope="col">Turns</th>
            </tr>
          </thead>
          <tbody>
            {report.top_errors.map((row) => (
              <tr key={row.code}>
                <td>
                  <code>{row.code}</code>
                </td>
                <td>{count(row.count)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </>
  );
}

function LimitsFigures({ projectId }: { projectId: string }) {
  const limits = useLimits(projectId);
  return (
    <section aria-labelledby="limits-heading">
      <h2 id="limits-heading">Usage caps</h2>
      <QueryState query={limits} what="the caps" />
      {limits.data ? (
        <>
          <dl className="figures">
            <dt>Model calls per minute</dt>
            <dd>{limits.data.rpmLimit === null ? 'no cap' : count(limits.data.rpmLimit)}</dd>
            <dt>Tokens per minute</dt>
            <dd>{limits.data.tpmLimit === null ? 'no cap' : count(limits.data.tpmLimit)}</dd>
            <dt>Spend</dt>
            <dd>{limits.data.budget === null ? 'no cap' : `${usd(limits.data.budget.amountUsd)} a ${limits.data.budget.window} (UTC)`}</dd>
          </dl>
          {limits.data.warnings?.map((warning) => (
            <p key={warning} className="note">
              {warning}
            </p>
          ))}
        </>
      ) : null}
    </section>
  );
}

export function ActivitySection({ projectId }: { projectId: string }) {
  const [period, setPeriod] = useState<UsageWindow>('24h');
  const health = useTurnHealth(projectId);
  const usage = useUsage(projectId, period);
  const observability = useObservability(projectId, period);
  return (
    <>
      <section aria-labelledby="turn-health-heading">
        <h2 id="turn-health-heading">Turn health</h2>
        <QueryState query={health} what="turn health" />
        {health.data ? <TurnHealthReport health={health.data} /> : null}
      </section>
      <section aria-labelledby="usage-heading">
        <h2 id="usage-heading">Usage and costs</h2>
        <form className="inline" onSubmit={(event) => event.preventDefault()}>
          <label htmlFor="usage-window">Period</label>
          <select id="usage-window" value={period} onChange={(event) => setPeriod(event.target.value as UsageWindow)}>
            {USAGE_WINDOWS.map((candidate) => (
              <option key={candidate} value={candidate}>
                {windowNames[candidate]}
              </option>
            ))}
          </select>
        </form>
        <QueryState query={usage} what="usage" />
        {usage.data ? <UsageFigures usage={usage.data} /> : null}
      </section>
      <section aria-labelledby="outcomes-heading">
        <h2 id="outcomes-heading">Turn outcomes and latency</h2>
        <p className="note">Over {windowNames[period]}, the period chosen above.</p>
        <QueryState query={observability} what="turn outcomes" />
        {observability.data ? <ObservabilityFigures report={observability.data} /> : null}
      </section>
      <LimitsFigures projectId={projectId} />
    </>
  );
}
