/** Small Preact pieces the pages share. */

/** An error said in words, announced to screen readers; nothing when there is none. */
export function Problem({ text }: { text: string }) {
	return text ? (
		<p class="error" role="alert">
			{text}
		</p>
	) : null;
}

/** A table's head: one column heading per name ("" for a column without one). */
export function Head({ columns }: { columns: string[] }) {
	return (
		<thead>
			<tr>
				{columns.map((c, i) => (
					<th key={i}>{c}</th>
				))}
			</tr>
		</thead>
	);
}
