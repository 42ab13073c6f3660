// A table of rows with its column headings; named by a heading (`labelledBy`) or a caption only screen readers read.
import type { ReactNode } from 'react';

export function DataTable({ columns, caption, labelledBy, children }: { columns: string[]; caption?: string; labelledBy?: string; children: ReactNode }) {
  return (
    <table aria-labelledby={labelledBy}>
      {caption ? <caption className="visually-hidden">{caption}</caption> : null}
      <thead>
        <tr>
          {columns.map((column) => (
            <th key={column} scope="col">
              {column}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  );
}
